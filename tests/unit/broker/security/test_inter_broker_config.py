"""Which listener brokers reach each other on, and with which credentials: Kafka 4.1's rules
(KafkaConfig, AbstractKafkaConfig) as broker/config.py and broker/security/inter_broker_client.py
apply them, refusals naming the key."""

import ssl

import pytest

from broker.config import INTER_BROKER_LISTENER, ConfigError, parse_config
from broker.security.inter_broker_client import inter_broker_client

SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="s3cret";'
PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
              'password="pw" user_broker="pw" user_alice="a";')
TWO = {"listeners": "CLIENT://127.0.0.1:1,INTERNAL://127.0.0.1:2",
       "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
       "sasl.enabled.mechanisms": "SCRAM-SHA-512"}


def refusal(settings: dict) -> str:
    with pytest.raises(ConfigError) as e:
        inter_broker_client(parse_config(settings))
    return str(e.value)


def test_default_is_the_listener_named_plaintext_as_kafka():
    cfg = parse_config({"listeners": "CLIENT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
                        "listener.security.protocol.map": "CLIENT:PLAINTEXT,PLAINTEXT:PLAINTEXT"})
    assert cfg[INTER_BROKER_LISTENER] == "PLAINTEXT"


def test_security_inter_broker_protocol_names_the_listener():
    cfg = parse_config({"listeners": "PLAINTEXT://127.0.0.1:1,SSL://127.0.0.1:2", "security.inter.broker.protocol": "ssl",
                        "ssl.keystore.type": "PEM"})
    assert cfg[INTER_BROKER_LISTENER] == "SSL"
    assert "'security.inter.broker.protocol' SASL_SSL" in refusal({"security.inter.broker.protocol": "SASL_SSL"})
    assert "'security.inter.broker.protocol'" in refusal({"security.inter.broker.protocol": "KERBEROS"})


def test_both_keys_set_is_refused():
    assert "Only one of 'inter.broker.listener.name' and 'security.inter.broker.protocol'" in refusal(
        {"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"})


def test_the_listener_must_be_advertised():
    message = refusal({**TWO, "inter.broker.listener.name": "INTERNAL",
                       "advertised.listeners": "CLIENT://127.0.0.1:1"})
    assert "'inter.broker.listener.name' INTERNAL" in message and "'advertised.listeners'" in message


def test_sasl_mechanism_must_be_enabled_and_served():
    base = {**TWO, "inter.broker.listener.name": "INTERNAL"}
    message = refusal(base)  # Kafka's default mechanism, GSSAPI, is not enabled on the listener
    assert "'sasl.mechanism.inter.broker.protocol' (GSSAPI) must be included in 'sasl.enabled.mechanisms'" in message
    assert "GSSAPI" in refusal({**base, "sasl.enabled.mechanisms": "GSSAPI"})
    assert "'sasl.mechanism.inter.broker.protocol' GSSAPI" in refusal({**base, "sasl.enabled.mechanisms": "GSSAPI"})


def test_sasl_needs_the_brokers_own_credentials():
    base = {**TWO, "inter.broker.listener.name": "INTERNAL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"}
    assert "'listener.name.internal.scram-sha-512.sasl.jaas.config' must hold the broker's own credentials" in refusal(base)
    client = inter_broker_client(parse_config({**base, "listener.name.internal.scram-sha-512.sasl.jaas.config": SCRAM_JAAS}))
    assert (client.listener, client.protocol, client.mechanism, client.username, client.password) == (
        "INTERNAL", "SASL_PLAINTEXT", "SCRAM-SHA-512", "broker", "s3cret")
    assert client.ssl_context is None and client.sasl


def test_plain_credentials_share_the_jaas_with_the_server_users():
    client = inter_broker_client(parse_config({
        **TWO, "sasl.enabled.mechanisms": "PLAIN", "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN", "listener.name.internal.plain.sasl.jaas.config": PLAIN_JAAS}))
    assert (client.mechanism, client.username, client.password) == ("PLAIN", "broker", "pw")


def test_a_scram_jaas_with_the_plain_module_is_refused():
    message = refusal({**TWO, "inter.broker.listener.name": "INTERNAL",
                       "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                       "listener.name.internal.scram-sha-512.sasl.jaas.config": PLAIN_JAAS})
    assert "ScramLoginModule" in message


def test_tls_client_trusts_the_listeners_truststore(tmp_path):
    from flotilla.testenv.brokers.tls_certs import make_pki

    pki = make_pki(tmp_path)
    cfg = parse_config({"listeners": "SSL://127.0.0.1:1", "security.inter.broker.protocol": "SSL",
                        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
                        "ssl.truststore.type": "PEM", "listener.name.ssl.ssl.truststore.location": str(pki.ca_file)})
    client = inter_broker_client(cfg)
    assert client.protocol == "SSL" and not client.sasl
    assert client.ssl_context.verify_mode == ssl.CERT_REQUIRED and client.ssl_context.check_hostname
    assert len(client.ssl_context.get_ca_certs()) == 1


def test_lenient_default_keeps_a_single_sasl_listener_starting():
    """No listener named PLAINTEXT and neither key set: Kafka refuses; Flotilla takes the first
    listener, unauthenticated unless sasl.mechanism.inter.broker.protocol is set (docs/security.md)."""
    cfg = parse_config({"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    assert cfg[INTER_BROKER_LISTENER] == "SASL_PLAINTEXT" and not inter_broker_client(cfg).sasl
    assert "scram-sha-512.sasl.jaas.config" in refusal(
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:1", "sasl.enabled.mechanisms": "SCRAM-SHA-512",
         "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512"})
