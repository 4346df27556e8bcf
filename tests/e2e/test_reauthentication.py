"""Re-authentication of SASL connections (KIP-368, `connections.max.reauth.ms`) with real clients:
a librdkafka producer keeps one connection across several session lifetimes by re-authenticating
on it; a raw client is told the lifetime, may re-authenticate (same user) and is disconnected at
its first request after the lifetime when it does not. Same against Apache Kafka 4.1 configured
alike (`--kafka-target=apache`).

The waits past a lifetime are sleeps: the lifetime is the thing tested (3 s here).
"""

from __future__ import annotations

import datetime
import json
import logging
import time

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from flotilla.testenv import kafka_wire
from tests.support.interop_suite import make_topic
from tests.support.secure_broker import SecureBroker, make_secure_broker
from flotilla.testenv.brokers.tls_certs import make_pki

pytestmark = pytest.mark.timeout(120)

LIFETIME_MS = 3000


@pytest.fixture(scope="module")
def secure(kafka_target, tmp_path_factory) -> SecureBroker:
    base = tmp_path_factory.mktemp("reauth")
    sb = make_secure_broker(kafka_target, base / "broker", make_pki(base / "pki"),
                            {"connections.max.reauth.ms": str(LIFETIME_MS)})
    sb.broker.start()
    try:
        yield sb
    finally:
        sb.broker.close()


def test_librdkafka_producer_reauthenticates_on_one_connection(secure):
    """Produce for more than three lifetimes: every record delivered, the broker connection never
    dropped (librdkafka's statistics), and the session lifetime received again and again on it."""
    from confluent_kafka import Producer

    topic = make_topic(secure.broker, 1, "reauth")
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    logger = logging.getLogger("reauth-librdkafka")
    logger.addHandler(Collect())
    logger.setLevel(logging.DEBUG)
    stats: list[dict] = []
    errors: list = []
    producer = Producer({**secure.confluent("SASL_SSL"), "acks": "all", "debug": "security", "logger": logger,
                         "statistics.interval.ms": 500, "stats_cb": lambda s: stats.append(json.loads(s)),
                         "error_cb": errors.append})
    sent, delivered = 0, []
    end = time.monotonic() + 3.5 * LIFETIME_MS / 1000
    while time.monotonic() < end:
        producer.produce(topic, f"r{sent}".encode(), partition=0,
                         on_delivery=lambda err, m: delivered.append(err))
        sent += 1
        producer.poll(0.1)
    assert producer.flush(30) == 0
    producer.poll(1)  # a last statistics event
    assert len(delivered) == sent and not any(delivered), [e for e in delivered if e][:3]
    assert not errors, errors
    node = [b for b in stats[-1]["brokers"].values() if b["nodeid"] >= 0]
    assert [(b["connects"], b["disconnects"]) for b in node] == [(1, 0)], node
    renewals = [line for line in lines if "Received session lifetime" in line and "/bootstrap" not in line]
    assert len(renewals) >= 3, lines[-20:]


def _authenticate(conn: kafka_wire.KafkaConnection, user: str = "bob", password: str = "bob-secret"):
    assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    return conn.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{password}".encode()))


def _raw(secure: SecureBroker) -> kafka_wire.KafkaConnection:
    return kafka_wire.KafkaConnection(secure.address("SASL_PLAINTEXT"), timeout=10)


def test_a_client_that_does_not_reauthenticate_is_disconnected_after_the_lifetime(secure):
    with _raw(secure) as conn:
        answer = _authenticate(conn)
        assert answer.error_code == ErrorCode.none
        assert answer.session_lifetime == datetime.timedelta(milliseconds=LIFETIME_MS)
        assert conn.metadata(topics=[]).brokers
        time.sleep(LIFETIME_MS / 1000 + 0.5)
        conn.send(conn_metadata_request())
        assert conn.is_closed_by_peer(10), "a request after the session's end was served"


def conn_metadata_request():
    from kio.schema.metadata.v12.request import MetadataRequest

    return MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)


def test_reauthentication_renews_the_session_and_keeps_the_principal(secure):
    with _raw(secure) as conn:
        assert _authenticate(conn).error_code == ErrorCode.none
        time.sleep(LIFETIME_MS / 2000)
        again = _authenticate(conn)
        assert again.error_code == ErrorCode.none, again
        assert again.session_lifetime == datetime.timedelta(milliseconds=LIFETIME_MS)
        time.sleep(LIFETIME_MS / 2000 + 0.5)  # past the first session's end, inside the second's
        assert conn.metadata(topics=[]).brokers, "no Metadata inside the renewed session"
        # within a second of the last re-authentication: a SaslHandshake is refused, as on any
        # authenticated connection
        assert _authenticate_twice_quickly(conn) == ErrorCode.illegal_sasl_state
    with _raw(secure) as conn:
        assert _authenticate(conn).error_code == ErrorCode.none
        time.sleep(1.1)
        other = _authenticate(conn, "alice", "alice-secret")
        assert other.error_code == ErrorCode.sasl_authentication_failed
        assert other.error_message == "Cannot change principals during re-authentication from User.bob: User.alice"
        assert conn.is_closed_by_peer(10)


def _authenticate_twice_quickly(conn: kafka_wire.KafkaConnection) -> ErrorCode:
    """Re-authenticate, then at once send another SaslHandshake; its error code."""
    assert _authenticate(conn).error_code == ErrorCode.none
    return conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code
