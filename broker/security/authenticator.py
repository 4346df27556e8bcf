"""SASL on one connection before it may send anything else, as Kafka's SaslServerAuthenticator.

Until authentication completes the connection's frames come here instead of the dispatcher:

- first, ApiVersions (answered by the dispatcher, at most once) and then SaslHandshake: the client
  names a mechanism; one not enabled answers UNSUPPORTED_SASL_MECHANISM with the enabled ones and
  the connection closes. Any other request closes the connection without an answer (Kafka: an
  InvalidRequestException "Unexpected Kafka request of type ... during SASL handshake").
- then the mechanism's tokens: in SaslAuthenticate requests after SaslHandshake v1 (any other
  request answers ILLEGAL_SASL_STATE and the connection closes), or as bare length-prefixed
  tokens after SaslHandshake v0.
- a refused token answers SASL_AUTHENTICATION_FAILED with Kafka's message after
  `connection.failed.authentication.delay.ms`, is logged, counted, and the connection closes.

On success the connection's principal becomes User:<name> and its frames go to the dispatcher.
With `connections.max.reauth.ms` set, SaslAuthenticate answers that as session_lifetime_ms and the
connection gets a SaslSession (reauthentication.py), whose SaslHandshake makes a new authenticator
of this class, `reauthenticating` the session: same mechanism, same principal, or it fails.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from broker.protocol.response import Response
from broker.protocol import codec
from broker.security.listeners import ListenerSecurity
from broker.security.mechanisms import SaslFailure, SaslServer, server_for
from broker.security.principal import KafkaPrincipal, user
from broker.security.reauthentication import SaslSession, reauthentication_refusal

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, codec.API_VERSIONS_KEY
_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")
_NO_REAUTH = datetime.timedelta(0)


class SaslDispatcher(Protocol):
    """What authentication asks of the request dispatcher (broker/apis/dispatcher.py): the versions it
    serves, ApiVersions answered before the handshake, and an API's own answer carrying an error."""

    supported: dict[int, tuple[int, int]]

    async def dispatch(self, conn: Any, frame: bytes) -> Response | None: ...

    def error_answer(self, conn: Any, header: codec.RequestHeader, body: Any, code: ErrorCode,
                     message: str) -> Any: ...


class SaslConnection(Protocol):
    """What authentication uses of a connection (broker/network/connection.py's Connection)."""

    id: int
    peer: str
    dispatcher: SaslDispatcher
    sasl_session: SaslSession | None

    def authenticated(self, principal: KafkaPrincipal) -> None: ...


class AuthenticationClosed(Exception):
    """The connection must close now, without an answer; the message is logged."""


def failure_message(mechanism: str) -> str:
    """Kafka's answer to a SASL exchange refused for invalid credentials (its SaslException path)."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class SaslAuthenticator:
    def __init__(self, security: ListenerSecurity, metrics, reauthenticating: SaslSession | None = None,
                 started_at: float | None = None) -> None:
        """`reauthenticating`: the session a re-authentication (begun at loop time `started_at`) renews."""
        self.security = security
        self.metrics = metrics
        self.reauthenticating = reauthenticating
        self.started_at = started_at
        self._refusal: str | None = None  # a re-authentication's changed mechanism, told at the first token
        self.complete = False
        self._versions_seen = False
        self._server: SaslServer | None = None
        self._headers = True  # SaslHandshake v1+: tokens come in SaslAuthenticate requests

    async def receive(self, conn: SaslConnection, frame: bytes) -> Response | None:
        try:
            if self._server is None:
                return await self._handshake(conn, frame)
            if self._headers:
                return await self._authenticate(conn, frame)
            return await self._raw_token(conn, frame)
        except AuthenticationClosed as e:
            log.info("closing connection %s from %s on listener %s during SASL authentication: %s",
                     conn.id, conn.peer, self.security.name, e)
            return Response([], close_after=True)

    async def _handshake(self, conn: SaslConnection, frame: bytes) -> Response | None:
        api_key = _API_KEY.unpack_from(frame)[0] if len(frame) >= 2 else -1
        if api_key == API_VERSIONS and not self._versions_seen:
            self._versions_seen = True
            return await conn.dispatcher.dispatch(conn, frame)
        if api_key != SASL_HANDSHAKE:
            raise AuthenticationClosed(f"unexpected request of type {codec.api_name(api_key)} during SASL handshake "
                                       "(a client configured with the wrong security protocol?)")
        header, body = self._parse(conn, frame)
        mechanism = body.mechanism
        module = codec.response_module(SASL_HANDSHAKE, header.api_version)
        enabled = self.security.mechanisms
        if mechanism not in enabled:
            self._failed(conn, "none", f"unsupported SASL mechanism {mechanism!r}")
            answer = module.SaslHandshakeResponse(error_code=ErrorCode.unsupported_sasl_mechanism, mechanisms=enabled)
            return self._respond(header, answer, close=True)
        self._server = server_for(mechanism, self.security.plain_users, self.security.scram)
        self._headers = header.api_version >= 1
        if self.reauthenticating is not None:  # Kafka answers the handshake, then fails the first token
            self._refusal = reauthentication_refusal(self.reauthenticating, mechanism, None)
        answer = module.SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=enabled)
        return self._respond(header, answer)

    async def _authenticate(self, conn: SaslConnection, frame: bytes) -> Response | None:
        header, body = self._parse(conn, frame)
        assert self._server is not None
        if header.api_key != SASL_AUTHENTICATE:
            message = f"Unexpected Kafka request of type {codec.api_name(header.api_key)} during SASL authentication."
            log.info("closing connection %s from %s on listener %s: %s (ILLEGAL_SASL_STATE)",
                     conn.id, conn.peer, self.security.name, message)
            return self._error_response(conn, header, body, message)
        module = codec.response_module(SASL_AUTHENTICATE, header.api_version)
        try:
            token = self._evaluate(body.auth_bytes)
        except SaslFailure as e:
            self._failed(conn, self._server.mechanism, str(e))
            await asyncio.sleep(self.security.failed_auth_delay_s)
            answer = codec.build(module.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                                 error_message=e.client_message or failure_message(self._server.mechanism),
                                 auth_bytes=b"", session_lifetime=_NO_REAUTH)
            return self._respond(header, answer, close=True)
        lifetime = self._succeeded(conn) if self._server.complete else _NO_REAUTH
        answer = codec.build(module.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
                             auth_bytes=token, session_lifetime=lifetime)
        return self._respond(header, answer)

    def _evaluate(self, token: bytes) -> bytes:
        """The mechanism's next token; a re-authentication that changed mechanism or principal fails."""
        assert self._server is not None
        if self._refusal is not None:
            raise SaslFailure(self._refusal, self._refusal)
        answer = self._server.evaluate(token)
        if self._server.complete and self.reauthenticating is not None:
            refusal = reauthentication_refusal(self.reauthenticating, self._server.mechanism,
                                               user(self._server.username or ""))
            if refusal is not None:
                raise SaslFailure(refusal, refusal)
        return answer

    async def _raw_token(self, conn: SaslConnection, frame: bytes) -> Response | None:
        assert self._server is not None
        try:
            token = self._evaluate(frame)
        except SaslFailure as e:
            self._failed(conn, self._server.mechanism, str(e))
            await asyncio.sleep(self.security.failed_auth_delay_s)
            return Response([], close_after=True)  # no error frame exists before SaslAuthenticate
        if self._server.complete:
            self._succeeded(conn)  # no SaslAuthenticate to tell the lifetime in: the session still ends
        return Response([_SIZE.pack(len(token)) + token])

    def _parse(self, conn: SaslConnection, frame: bytes):
        try:
            header = codec.parse_header(frame, conn.dispatcher.supported)
            return header, codec.parse_body(frame, header)
        except (codec.UnsupportedVersion, codec.MalformedRequest) as e:
            raise AuthenticationClosed(f"unparseable request during SASL authentication: {e}") from None

    @staticmethod
    def _respond(header, body, close: bool = False) -> Response:
        data = codec.encode_body(header.api_key, header.api_version, body)
        return Response([codec.frame_response(header, data)], close_after=close)

    def _error_response(self, conn: SaslConnection, header, body, message: str) -> Response:
        """The requested API's own error answer with ILLEGAL_SASL_STATE, then close (Kafka's getErrorResponse)."""
        try:
            answer = conn.dispatcher.error_answer(conn, header, body, ErrorCode.illegal_sasl_state, message)
        except Exception:  # an API whose error shape cannot be built: just close
            answer = None
        if answer is None:
            return Response([], close_after=True)
        return self._respond(header, answer, close=True)

    def _succeeded(self, conn: SaslConnection) -> datetime.timedelta:
        """Authenticated: the principal on the connection, a new session if sessions are limited;
        returns the session's lifetime for SaslAuthenticate (0: unlimited)."""
        assert self._server is not None and self._server.username is not None
        principal = user(self._server.username)
        conn.authenticated(principal)
        self.complete = True
        self.metrics.authentications(self.security.name, self._server.mechanism, ok=True)
        log.debug("connection %s from %s %sauthenticated as User:%s with %s", conn.id, conn.peer,
                  "re-" if self.reauthenticating else "", self._server.username, self._server.mechanism)
        lifetime_s = self.security.max_reauth_s
        if lifetime_s <= 0:
            conn.sasl_session = None
            return _NO_REAUTH
        now = asyncio.get_running_loop().time()
        conn.sasl_session = SaslSession(self.security, self._server.mechanism, principal, now + lifetime_s,
                                        reauth_started_at=self.started_at)
        return datetime.timedelta(seconds=lifetime_s)

    def _failed(self, conn: SaslConnection, mechanism: str, reason: str) -> None:
        self.metrics.authentications(self.security.name, mechanism, ok=False)
        log.info("failed authentication of connection %s from %s on listener %s with %s: %s",
                 conn.id, conn.peer, self.security.name, mechanism, reason)


def reauthenticator(session: SaslSession, frame: bytes, metrics) -> SaslAuthenticator | None:
    """KIP-368, before a request on a connection with a SASL session: the authenticator that takes
    the request when it begins re-authentication, None to serve it as usual; SessionExpired when the
    session ended (SaslSession.check)."""
    now = asyncio.get_running_loop().time()
    if session.check(frame, now):
        return SaslAuthenticator(session.security, metrics, reauthenticating=session, started_at=now)
    return None
