"""The SASL state machine of one connection (Kafka's SaslServerAuthenticator), frame by frame."""

import asyncio
import struct

from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from broker.security.authenticator import SaslAuthenticator
from broker.security.credentials import PlainUsers
from broker.security.listeners import ListenerSecurity
from broker.security.principal import ANONYMOUS
from broker.apis.dispatcher import RequestDispatcher
from broker.apis.handlers.api_versions import ApiVersionsHandler
from broker.apis.handlers.metadata import MetadataHandler
from broker.server.metrics import BrokerMetrics
from flotilla.testenv import kafka_wire


class FakeConnection:
    peer = "127.0.0.1:1"
    id = 1
    listener_name = "SASL_PLAINTEXT"

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.principal = ANONYMOUS

    def authenticated(self, principal):
        self.principal = principal


class FakeBroker:
    dispatcher = None


def _setup():
    metrics = BrokerMetrics()
    broker = FakeBroker()
    dispatcher = RequestDispatcher([ApiVersionsHandler(broker), MetadataHandler(broker)], metrics)
    dispatcher.supported.update({17: (0, 1), 36: (0, 2)})  # the real broker has their handlers
    broker.dispatcher = dispatcher
    security = ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT", mechanisms=("PLAIN",),
                                plain_users=PlainUsers({"alice": "alice-secret"}), failed_auth_delay_s=0)
    return SaslAuthenticator(security, metrics), FakeConnection(dispatcher), metrics


def _frame(request, correlation_id=5) -> bytes:
    t = type(request)
    head = struct.pack(">hhih", t.__api_key__, t.__version__, correlation_id, 1) + b"t"
    return head + (b"\x00" if t.__flexible__ else b"") + kafka_wire.encode(request)


def _body(response, response_type, flexible):
    frame = response.chunks[0][4:]
    offset = 4 + (1 if flexible else 0)  # correlation id (+ tagged fields)
    return kafka_wire.decode(response_type, frame, offset)[0]


def _run(auth, conn, request):
    return asyncio.run(auth.receive(conn, _frame(request)))


def test_handshake_then_plain_succeeds_and_sets_the_principal():
    auth, conn, metrics = _setup()
    hs = _run(auth, conn, SaslHandshakeRequest(mechanism="PLAIN"))
    assert _body(hs, SaslHandshakeResponse, False).error_code == ErrorCode.none and not hs.close_after
    ok = _run(auth, conn, SaslAuthenticateRequest(auth_bytes=b"\0alice\0alice-secret"))
    assert _body(ok, SaslAuthenticateResponse, True).error_code == ErrorCode.none and not ok.close_after
    assert auth.complete and str(conn.principal) == "User:alice"
    assert metrics.successful_authentications.labels("SASL_PLAINTEXT", "PLAIN")._value.get() == 1


def test_wrong_password_answers_kafkas_error_then_closes():
    auth, conn, metrics = _setup()
    _run(auth, conn, SaslHandshakeRequest(mechanism="PLAIN"))
    bad = _run(auth, conn, SaslAuthenticateRequest(auth_bytes=b"\0alice\0nope"))
    body = _body(bad, SaslAuthenticateResponse, True)
    assert body.error_code == ErrorCode.sasl_authentication_failed and bad.close_after
    assert body.error_message == "Authentication failed: Invalid username or password"
    assert conn.principal is ANONYMOUS and not auth.complete
    assert metrics.failed_authentications.labels("SASL_PLAINTEXT", "PLAIN")._value.get() == 1


def test_unknown_mechanism_lists_the_enabled_ones_and_closes():
    auth, conn, _ = _setup()
    r = _run(auth, conn, SaslHandshakeRequest(mechanism="SCRAM-SHA-256"))
    body = _body(r, SaslHandshakeResponse, False)
    assert body.error_code == ErrorCode.unsupported_sasl_mechanism and body.mechanisms == ("PLAIN",) and r.close_after


def test_a_request_before_the_handshake_closes_without_an_answer():
    auth, conn, _ = _setup()
    r = _run(auth, conn, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
    assert r.chunks == [] and r.close_after


def test_a_request_during_authentication_is_illegal():
    auth, conn, _ = _setup()
    _run(auth, conn, SaslHandshakeRequest(mechanism="PLAIN"))
    r = _run(auth, conn, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                         include_topic_authorized_operations=False))
    assert r.close_after and not auth.complete


def test_garbage_frames_close_the_connection():
    auth, conn, _ = _setup()
    for frame in (b"", b"\x00", b"\x00\x11\x00\x07garbage", b"\xff\xff\xff\xff"):
        r = asyncio.run(SaslAuthenticator(auth.security, auth.metrics).receive(conn, frame))
        assert r.close_after, frame
