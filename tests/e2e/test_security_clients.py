"""aiokafka, the Java client (kafka-clients 4.1) and kcat over every secured listener, and expired
certificates and wrong passwords as these clients see them.

tests/e2e/test_security.py covers confluent-kafka and kafka-python on a broker configured the same
way (tests/support/secure_broker.py); here each family writes after librdkafka and reads both
back, so a family's records are also readable by another client. Runs against Apache Kafka 4.1
too (`--kafka-target=apache`). The Java client starts one JVM per listener (produce and read).

kcat and SCRAM: librdkafka before 2.6.1 repeats the client nonce in its client-final message, which
Kafka 4.x (strict RFC 5802 nonce check) refuses as invalid credentials, and so does Flotilla. Where
kcat's packaged librdkafka is that old (Debian's kcat 1.7.1 links 2.0.2), the SCRAM tests check that
refusal and then run kcat with the current librdkafka of confluent-kafka's wheel (LD_PRELOAD).
"""

from __future__ import annotations

import pytest

from tests.support.interop_suite import make_topic
from tests.support.secure_broker import SecureBroker, running_secure_broker
from tests.support.secure_clients import (aiokafka_failure, aiokafka_round_trip, confluent_produce, confluent_read,
                                          java_failure, java_round_trip, kcat_failure, kcat_librdkafka_version,
                                          kcat_round_trip, wheel_librdkafka)

pytestmark = pytest.mark.timeout(120)

ROUND_TRIPS = [("SSL", None), ("MTLS", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
               ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")]
FAMILIES = ("aiokafka", "java", "kcat")
FIXED_SCRAM_NONCE = (2, 6, 1)  # the first librdkafka whose SCRAM Kafka 4.x accepts
WRONG_PASSWORD = {
    "PLAIN": "Authentication failed: Invalid username or password",
    "SCRAM-SHA-512": ("Authentication failed during authentication due to invalid credentials with SASL "
                      "mechanism SCRAM-SHA-512"),
}


@pytest.fixture(scope="module")
def secure(kafka_target, tmp_path_factory) -> SecureBroker:
    with running_secure_broker(kafka_target, tmp_path_factory.mktemp("secure-clients")) as sb:
        yield sb


def _mech(mechanism: str | None) -> dict[str, str]:
    return {"mechanism": mechanism} if mechanism else {}


def _round_trip(family: str, secure: SecureBroker, listener: str, settings: dict, topic: str,
                values: list[bytes], expect: int) -> list[bytes]:
    if family == "aiokafka":
        return aiokafka_round_trip(secure.aiokafka(listener, **settings), topic, values, expect)
    if family == "java":
        return java_round_trip(secure, listener, topic, values, expect, **settings)
    conf = secure.confluent(listener, **settings)
    preload = _kcat_preload(settings.get("mechanism", ""))
    if preload:
        stderr = kcat_failure(conf)
        assert WRONG_PASSWORD["SCRAM-SHA-512"] in stderr, stderr[-2000:]
    return kcat_round_trip(conf, topic, values, expect, preload=preload)


def _kcat_preload(mechanism: str) -> str | None:
    """A librdkafka whose SCRAM works with Kafka 4.x for kcat, where its own is older (None: its own)."""
    return wheel_librdkafka() if mechanism.startswith("SCRAM") and kcat_librdkafka_version() < FIXED_SCRAM_NONCE else None


@pytest.mark.parametrize("listener,mechanism", ROUND_TRIPS, ids=[f"{l}-{m or 'cert'}" for l, m in ROUND_TRIPS])
@pytest.mark.parametrize("family", FAMILIES)
def test_family_produces_and_consumes(secure, family, listener, mechanism):
    """librdkafka writes, the family writes and reads both back, librdkafka reads the family's."""
    topic = make_topic(secure.broker, 1, f"sec-{family}-{listener.lower()}")
    first = [f"confluent-{i}".encode() for i in range(10)]
    confluent_produce(secure.confluent(listener, **_mech(mechanism)), topic, first)
    ours = [f"{family}-{i}".encode() for i in range(10)]
    assert _round_trip(family, secure, listener, _mech(mechanism), topic, ours, 20) == first + ours
    assert confluent_read(secure.confluent(listener, **_mech(mechanism)), topic, 20) == first + ours


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_wrong_password_gets_kafkas_authentication_error(secure, mechanism, caplog):
    logged = aiokafka_failure(secure.aiokafka("SASL_SSL", mechanism=mechanism, password="wrong"), caplog)
    assert "[Error 58] SaslAuthenticationFailed" in logged and WRONG_PASSWORD[mechanism] in logged, logged
    stderr = java_failure(secure, "SASL_SSL", mechanism=mechanism, password="wrong")
    assert "SaslAuthenticationException" in stderr and WRONG_PASSWORD[mechanism] in stderr, stderr[-3000:]
    stderr = kcat_failure(secure.confluent("SASL_SSL", mechanism=mechanism, password="wrong"), _kcat_preload(mechanism))
    assert "SASL authentication error" in stderr and WRONG_PASSWORD[mechanism] in stderr, stderr[-3000:]


def test_unknown_mechanism_gets_kafkas_error(secure, caplog):
    """A mechanism the listener does not enable (SCRAM-SHA-256 here): UNSUPPORTED_SASL_MECHANISM,
    which each client reports with the listener's enabled mechanisms or the error's name."""
    logged = aiokafka_failure(secure.aiokafka("SASL_SSL", mechanism="SCRAM-SHA-256"), caplog)
    assert "UnsupportedSaslMechanism" in logged, logged
    stderr = java_failure(secure, "SASL_SSL", mechanism="SCRAM-SHA-256")
    assert "UnsupportedSaslMechanismException" in stderr and "SCRAM-SHA-256" in stderr, stderr[-3000:]
    stderr = kcat_failure(secure.confluent("SASL_SSL", mechanism="SCRAM-SHA-256"))
    assert "Unsupported SASL mechanism: broker's supported mechanisms: PLAIN,SCRAM-SHA-512" in stderr, stderr[-3000:]


def _confluent_errors(conf: dict) -> list[str]:
    """The errors a librdkafka admin client reports when it cannot reach the broker."""
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    with pytest.raises(Exception):
        admin.list_topics(timeout=5)
    admin.poll(1)  # error_cb runs from poll()
    return [e.str() for e in errors]


@pytest.mark.parametrize("cert", ["expired", "mallory"])
def test_expired_or_untrusted_client_certificate_is_refused(secure, cert, caplog):
    """The mTLS listener refuses a certificate its CA signed once its validity has ended, and one
    another CA signed, with a TLS alert saying so (the Java client then fails at once with
    SslAuthenticationException instead of retrying); it serves a valid certificate afterwards."""
    assert _confluent_errors(secure.confluent("MTLS", cert=cert)), "librdkafka reported nothing"
    # aiokafka reports a closed connection, whatever the alert said (against Kafka too).
    logged = aiokafka_failure(secure.aiokafka("MTLS", cert=cert), caplog)
    assert "Unable connect to" in logged, logged
    stderr = java_failure(secure, "MTLS", cert=cert)
    assert "SslAuthenticationException" in stderr and "Received fatal alert" in stderr, stderr[-3000:]
    topic = make_topic(secure.broker, 1, f"after-{cert}-client")
    confluent_produce(secure.confluent("MTLS"), topic, [b"still-serving"])
    assert aiokafka_round_trip(secure.aiokafka("MTLS"), topic, [], 1) == [b"still-serving"]


def test_expired_server_certificate_is_refused_by_clients(secure, caplog):
    """A listener presenting an expired certificate (signed by the trusted CA) is refused by every
    client's own check; the broker's other listeners serve on."""
    # librdkafka names only the failed verification, Python's ssl and Java the expiry.
    errors = _confluent_errors(secure.confluent("EXPIRED"))
    assert any("certificate verify failed" in e for e in errors), errors
    logged = aiokafka_failure(secure.aiokafka("EXPIRED"), caplog)
    assert "certificate has expired" in logged, logged
    stderr = java_failure(secure, "EXPIRED")
    assert "SslAuthenticationException" in stderr and "CertificateExpiredException" in stderr, stderr[-3000:]
    topic = make_topic(secure.broker, 1, "after-expired-server")
    confluent_produce(secure.confluent("SSL"), topic, [b"still-serving"])
    assert aiokafka_round_trip(secure.aiokafka("SSL"), topic, [], 1) == [b"still-serving"]
