"""Listener security, as Kafka's: TLS on SSL/SASL_SSL listeners (`tls.py`), SASL PLAIN and SCRAM
(`authenticator.py`, `mechanisms.py`, credentials from `credentials.py`), and the principal each
connection ends up with (`principal.py`), which quotas use now and an authorizer will use next.
See docs/security.md."""
