"""Listener security with real clients over real sockets: TLS, mTLS, SASL PLAIN and SCRAM-SHA-512.

One broker per module with a listener per security protocol (tests/support/secure_broker.py); the
same tests run against Apache Kafka 4.1 configured alike (`--kafka-target=apache`), except where a
test says Flotilla-only (its log lines and metrics). Certificates are made at test time.
"""

from __future__ import annotations

import socket
import ssl
import time

import pytest
import scramp
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from flotilla.testenv import kafka_wire
from tests.support.interop_suite import make_topic
from tests.support.prometheus import metric
from tests.support.secure_broker import SecureBroker, running_secure_broker
from tests.support.secure_clients import confluent_produce as _confluent_produce
from tests.support.secure_clients import confluent_read as _confluent_read
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(120)

ROUND_TRIPS = [("SSL", None), ("MTLS", None), ("SASL_PLAINTEXT", "PLAIN"), ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
               ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN")]
MTLS_PRINCIPAL_NAME = "CN=alice,OU=clients,O=Flotilla Tests"


@pytest.fixture(scope="module")
def secure(kafka_target, tmp_path_factory) -> SecureBroker:
    with running_secure_broker(kafka_target, tmp_path_factory.mktemp("secure")) as sb:
        yield sb


def _mech(mechanism):
    return {"mechanism": mechanism} if mechanism else {}


def _kafka_python_produce(kw: dict, topic: str, values: list[bytes]) -> None:
    from kafka import KafkaProducer

    p = KafkaProducer(acks="all", request_timeout_ms=15000, **kw)
    try:
        for f in [p.send(topic, v, partition=0) for v in values]:
            f.get(timeout=30)
    finally:
        p.close(timeout=10)


def _kafka_python_read(kw: dict, topic: str, count: int) -> list[bytes]:
    from kafka import KafkaConsumer, TopicPartition

    c = KafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **kw)
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0)])
        c.seek(TopicPartition(topic, 0), 0)
        deadline = time.monotonic() + 30
        while len(got) < count and time.monotonic() < deadline:
            for records in c.poll(timeout_ms=500).values():
                got.extend(r.value for r in records)
    finally:
        c.close()
    return got


@pytest.mark.parametrize("listener,mechanism", ROUND_TRIPS, ids=[f"{l}-{m or 'cert'}" for l, m in ROUND_TRIPS])
def test_both_client_families_produce_and_consume(secure, listener, mechanism):
    """librdkafka writes and kafka-python reads, then the other way round, over the listener."""
    topic = make_topic(secure.broker, 1, f"sec-{listener.lower()}")
    first = [f"confluent-{i}".encode() for i in range(20)]
    _confluent_produce(secure.confluent(listener, **_mech(mechanism)), topic, first)
    assert _kafka_python_read(secure.kafka_python(listener, **_mech(mechanism)), topic, 20) == first
    second = [f"kafka-python-{i}".encode() for i in range(20)]
    _kafka_python_produce(secure.kafka_python(listener, **_mech(mechanism)), topic, second)
    assert _confluent_read(secure.confluent(listener, **_mech(mechanism)), topic, 40) == first + second


def _confluent_auth_error(conf: dict) -> str:
    """The error a librdkafka admin client reports when it cannot authenticate."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    with pytest.raises(Exception):
        admin.list_topics(timeout=3)
    admin.poll(1)  # error_cb runs from poll()
    auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert auth, f"no authentication error reported, only {errors}"
    return auth[0].str()


@pytest.mark.parametrize("listener,mechanism", [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN")])
def test_wrong_password_is_refused_with_kafkas_error(secure, kafka_target, listener, mechanism, caplog):
    from kafka import KafkaProducer
    from kafka.errors import KafkaError as PyKafkaError

    message = _confluent_auth_error(secure.confluent(listener, mechanism=mechanism, password="wrong"))
    expected = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN" else
                f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")
    assert expected in message, message
    # kafka-python logs the broker's SASL_AUTHENTICATION_FAILED answer and gives up bootstrapping.
    # Every attempt must fail. An attempt may log only "socket disconnected": kafka-python 3.0.12's
    # transport (kafka/net/transport.py, _sock_recv) drops the bytes that arrive in the same read as
    # the close, and Apache Kafka closes right after the answer (one attempt in three on SASL_SSL when
    # the machine is loaded, and three in a row happened in CI). The answer itself is checked byte for
    # byte in test_scram_over_the_wire_wrong_proof; here up to ten clients, one must show it.
    logged: list[str] = []
    for _ in range(10):
        caplog.clear()
        with caplog.at_level("ERROR", logger="kafka"):
            with pytest.raises(PyKafkaError):
                KafkaProducer(**secure.kafka_python(listener, mechanism=mechanism, password="wrong"),
                              bootstrap_timeout_ms=3000)
        logged = [r.getMessage() for r in caplog.records if "SaslAuthenticationFailedError" in r.getMessage()]
        if logged:
            break
    assert logged and expected in logged[0], [r.getMessage() for r in caplog.records][-5:]
    if kafka_target == "flotilla":
        wait_for("the failed authentication in the broker log",
                 lambda: f"on listener {listener} with {mechanism}" in secure.broker.log_text(), timeout=10)
        assert metric(secure.broker.metrics_url, "flotilla_failed_authentication_total",
                      listener=listener, mechanism=mechanism) >= 2


def test_unknown_user_and_unknown_mechanism(secure):
    message = _confluent_auth_error(secure.confluent("SASL_SSL", user="alice", password="x") | {"sasl.username": "carol"})
    assert "invalid credentials with SASL mechanism SCRAM-SHA-512" in message, message
    message = _confluent_auth_error(secure.confluent("SASL_PLAINTEXT", mechanism="SCRAM-SHA-256"))
    assert "SCRAM-SHA-256" in message and ("not supported" in message or "Unsupported" in message), message


def _raw(secure: SecureBroker, listener: str = "SASL_PLAINTEXT") -> kafka_wire.KafkaConnection:
    return kafka_wire.KafkaConnection(secure.address(listener), timeout=10)


def test_requests_before_authentication_close_the_connection(secure):
    with _raw(secure) as conn:
        versions = conn.api_versions()
        served = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
        assert served[17] == (0, 1) and served[36] == (0, 2), served
        conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False))
        assert conn.is_closed_by_peer(10), "a Metadata request before SaslHandshake was served"
    with _raw(secure) as conn:
        conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert conn.is_closed_by_peer(10), "a first request other than ApiVersions/SaslHandshake was served"


def test_other_requests_during_sasl_authentication_are_illegal(secure):
    with _raw(secure) as conn:
        hs = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert hs.error_code == ErrorCode.none and "PLAIN" in hs.mechanisms
        conn.send(MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert conn.is_closed_by_peer(10)


def test_plain_over_the_wire_then_sasl_again_is_illegal(secure):
    with _raw(secure) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
        ok = conn.request(SaslAuthenticateRequest(auth_bytes=b"\0bob\0bob-secret"))
        assert ok.error_code == ErrorCode.none, ok
        assert conn.metadata(topics=[]).brokers, "no Metadata after authenticating"
        again = conn.request(SaslHandshakeRequest(mechanism="PLAIN"))
        assert again.error_code == ErrorCode.illegal_sasl_state, again


def test_unsupported_mechanism_answers_the_enabled_ones_and_closes(secure):
    with _raw(secure) as conn:
        hs = conn.request(SaslHandshakeRequest(mechanism="GSSAPI"))
        assert hs.error_code == ErrorCode.unsupported_sasl_mechanism
        assert set(hs.mechanisms) == {"PLAIN", "SCRAM-SHA-512"}
        assert conn.is_closed_by_peer(10)


def test_scram_over_the_wire_wrong_proof(secure):
    with _raw(secure) as conn:
        assert conn.request(SaslHandshakeRequest(mechanism="SCRAM-SHA-512")).error_code == ErrorCode.none
        client = scramp.ScramClient(["SCRAM-SHA-512"], "alice", "not-alices-password")
        first = conn.request(SaslAuthenticateRequest(auth_bytes=client.get_client_first().encode()))
        assert first.error_code == ErrorCode.none, first
        client.set_server_first(first.auth_bytes.decode())
        final = conn.request(SaslAuthenticateRequest(auth_bytes=client.get_client_final().encode()))
        assert final.error_code == ErrorCode.sasl_authentication_failed
        assert final.error_message == ("Authentication failed during authentication due to invalid credentials "
                                       "with SASL mechanism SCRAM-SHA-512")
        assert conn.is_closed_by_peer(10)


def test_plaintext_client_on_a_tls_port_fails_and_the_broker_keeps_serving(secure, kafka_target):
    for listener in ("SSL", "SASL_SSL"):
        with kafka_wire.KafkaConnection(secure.address(listener), timeout=10) as conn:
            # The broker answers the clear-text ApiVersions with a TLS alert (not a Kafka frame:
            # read as one, its length is absurd) or nothing, and closes.
            with pytest.raises((kafka_wire.ConnectionClosed, ConnectionError, ValueError)):
                conn.api_versions()
            assert conn.is_closed_by_peer(10)
    # A librdkafka client configured for PLAINTEXT reports a failure instead of hanging silently.
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({"bootstrap.servers": secure.address("SSL"), "error_cb": errors.append})
    with pytest.raises(Exception):
        admin.list_topics(timeout=5)
    admin.poll(1)  # error_cb runs from poll()
    assert errors, "librdkafka reported nothing"
    # ... and the listener still serves TLS clients.
    topic = make_topic(secure.broker, 1, "after-garbage")
    _confluent_produce(secure.confluent("SSL"), topic, [b"still-serving"])
    assert _kafka_python_read(secure.kafka_python("SSL"), topic, 1) == [b"still-serving"]
    if kafka_target == "flotilla":
        assert "TLS handshake failed" in secure.broker.log_text()
        assert metric(secure.broker.metrics_url, "flotilla_failed_authentication_total", listener="SSL",
                      mechanism="TLS") >= 1


def test_mtls_refuses_missing_and_untrusted_client_certificates(secure):
    from confluent_kafka.admin import AdminClient

    for cert in (None, "mallory"):
        errors: list = []
        admin = AdminClient({**secure.confluent("MTLS", cert=cert), "error_cb": errors.append})
        with pytest.raises(Exception):
            admin.list_topics(timeout=5)
        admin.poll(1)  # error_cb runs from poll()
        assert errors, f"client certificate {cert}: librdkafka reported nothing"
    # Python's ssl: the server's alert arrives on the first read (TLS 1.3) or fails the handshake.
    ctx = ssl.create_default_context(cafile=str(secure.pki.ca_file))
    ctx.load_cert_chain(secure.pki.client_cert("mallory"), secure.pki.client_key("mallory"))
    with socket.create_connection(("127.0.0.1", secure.ports["MTLS"]), timeout=10) as raw:
        with pytest.raises((ssl.SSLError, ConnectionError)):
            with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                s.sendall(b"\0\0\0\0")
                if not s.recv(1):
                    raise ConnectionError("closed")


def _set_user_byte_rate(secure: SecureBroker, user: str, rate: float | None) -> None:
    """AlterClientQuotas (over the PLAINTEXT listener): producer_byte_rate for a user entity (None: remove)."""
    from kio.schema.alter_client_quotas.v1 import request as q
    from kio.static.primitive import f64

    with kafka_wire.connect(secure.broker.bootstrap) as conn:
        answer = conn.request(q.AlterClientQuotasRequest(entries=(q.EntryData(
            entity=(q.EntityData(entity_type="user", entity_name=user),),
            ops=(q.OpData(key="producer_byte_rate", value=f64(float(rate or 0)), remove=rate is None),)),), validate_only=False))
    assert [e.error_code for e in answer.entries] == [ErrorCode.none], answer


def _throttled(conf: dict, topic: str) -> float:
    """Largest throttle time (s) librdkafka reports while producing up to five 20 KB records as
    `conf`'s principal, one at a time, stopping at the first throttle (the connection is muted
    for that long afterwards: KIP-219)."""
    from confluent_kafka import Producer

    seen = [0.0]
    p = Producer({**conf, "acks": "all", "linger.ms": 0,
                  "throttle_cb": lambda e: seen.__setitem__(0, max(seen[0], e.throttle_time))})
    for _ in range(5):
        p.produce(topic, b"q" * 20_000, partition=0)
        assert p.flush(30) == 0, "a record left undelivered"
        p.poll(0.2)  # serve a throttle event that came with the answer
        if seen[0] > 0:
            break
    return seen[0]


def test_the_principal_is_the_user_quotas_apply_to(secure):
    """The authenticated principal is on the connection: a user quota (KIP-13, applied to the
    principal's name) throttles alice over SASL and the mTLS subject, and neither bob nor an
    anonymous SSL client. (ACLs will read the same principal.)"""
    topic = make_topic(secure.broker, 1, "sec-quota")
    _set_user_byte_rate(secure, "alice", 1024)
    _set_user_byte_rate(secure, MTLS_PRINCIPAL_NAME, 1024)
    try:
        assert _throttled(secure.confluent("SASL_SSL", user="alice"), topic) > 0, "alice (SCRAM) was not throttled"
        assert _throttled(secure.confluent("MTLS", cert="alice"), topic) > 0, f"{MTLS_PRINCIPAL_NAME} was not throttled"
        assert _throttled(secure.confluent("SASL_PLAINTEXT", user="bob", mechanism="PLAIN"), topic) == 0
        assert _throttled(secure.confluent("SSL"), topic) == 0
    finally:
        _set_user_byte_rate(secure, "alice", None)
        _set_user_byte_rate(secure, MTLS_PRINCIPAL_NAME, None)


def test_sasl_handshake_v0_then_bare_tokens(secure):
    """SaslHandshake v0 (still served by Kafka 4.1): the tokens follow as bare length-prefixed
    frames, no SaslAuthenticate headers."""
    from kio.schema.sasl_handshake.v0.request import SaslHandshakeRequest as SaslHandshakeV0

    with _raw(secure) as conn:
        assert conn.request(SaslHandshakeV0(mechanism="PLAIN")).error_code == ErrorCode.none
        conn.send_frame(b"\0bob\0bob-secret")
        assert conn.recv_frame() == b"", "PLAIN's (empty) server token"
        assert conn.metadata(topics=[]).brokers, "no Metadata after authenticating"
