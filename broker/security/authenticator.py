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
SaslAuthenticate answers session_lifetime_ms 0: no re-authentication (KIP-152) yet.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import struct
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.network.response import Response
from broker.protocol import codec
from broker.security.listeners import ListenerSecurity
from broker.security.mechanisms import SaslFailure, SaslServer, server_for
from broker.security.principal import user

if TYPE_CHECKING:
    from broker.network.connection import Connection

log = logging.getLogger(__name__)

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, codec.API_VERSIONS_KEY
_API_KEY = struct.Struct(">h")
_SIZE = struct.Struct(">i")
_NO_REAUTH = datetime.timedelta(0)


class AuthenticationClosed(Exception):
    """The connection must close now, without an answer; the message is logged."""


def failure_message(mechanism: str) -> str:
    """Kafka's answer to a SASL exchange refused for invalid credentials (its SaslException path)."""
    return f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"


class SaslAuthenticator:
    def __init__(self, security: ListenerSecurity, metrics) -> None:
        self.security = security
        self.metrics = metrics
        self.complete = False
        self._versions_seen = False
        self._server: SaslServer | None = None
        self._headers = True  # SaslHandshake v1+: tokens come in SaslAuthenticate requests

    async def receive(self, conn: "Connection", frame: bytes) -> Response | None:
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

    async def _handshake(self, conn: "Connection", frame: bytes) -> Response | None:
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
        answer = module.SaslHandshakeResponse(error_code=ErrorCode.none, mechanisms=enabled)
        return self._respond(header, answer)

    async def _authenticate(self, conn: "Connection", frame: bytes) -> Response | None:
        header, body = self._parse(conn, frame)
        assert self._server is not None
        if header.api_key != SASL_AUTHENTICATE:
            message = f"Unexpected Kafka request of type {codec.api_name(header.api_key)} during SASL authentication."
            log.info("closing connection %s from %s on listener %s: %s (ILLEGAL_SASL_STATE)",
                     conn.id, conn.peer, self.security.name, message)
            return self._error_response(conn, header, body, message)
        module = codec.response_module(SASL_AUTHENTICATE, header.api_version)
        try:
            token = self._server.evaluate(body.auth_bytes)
        except SaslFailure as e:
            self._failed(conn, self._server.mechanism, str(e))
            await asyncio.sleep(self.security.failed_auth_delay_s)
            answer = codec.build(module.SaslAuthenticateResponse, error_code=ErrorCode.sasl_authentication_failed,
                                 error_message=e.client_message or failure_message(self._server.mechanism),
                                 auth_bytes=b"", session_lifetime=_NO_REAUTH)
            return self._respond(header, answer, close=True)
        if self._server.complete:
            self._succeeded(conn)
        answer = codec.build(module.SaslAuthenticateResponse, error_code=ErrorCode.none, error_message=None,
                             auth_bytes=token, session_lifetime=_NO_REAUTH)
        return self._respond(header, answer)

    async def _raw_token(self, conn: "Connection", frame: bytes) -> Response | None:
        assert self._server is not None
        try:
            token = self._server.evaluate(frame)
        except SaslFailure as e:
            self._failed(conn, self._server.mechanism, str(e))
            await asyncio.sleep(self.security.failed_auth_delay_s)
            return Response([], close_after=True)  # no error frame exists before SaslAuthenticate
        if self._server.complete:
            self._succeeded(conn)
        return Response([_SIZE.pack(len(token)) + token])

    def _parse(self, conn: "Connection", frame: bytes):
        try:
            header = codec.parse_header(frame, conn.dispatcher.supported)
            return header, codec.parse_body(frame, header)
        except (codec.UnsupportedVersion, codec.MalformedRequest) as e:
            raise AuthenticationClosed(f"unparseable request during SASL authentication: {e}") from None

    @staticmethod
    def _respond(header, body, close: bool = False) -> Response:
        data = codec.encode_body(header.api_key, header.api_version, body)
        return Response([codec.frame_response(header, data)], close_after=close)

    def _error_response(self, conn: "Connection", header, body, message: str) -> Response:
        """The requested API's own error answer with ILLEGAL_SASL_STATE, then close (Kafka's getErrorResponse)."""
        from broker.server.handlers.base import RequestContext

        handler = conn.dispatcher.handlers.get(header.api_key)
        try:
            answer = handler.error_response(RequestContext(header, conn), body, ErrorCode.illegal_sasl_state, message) \
                if handler is not None else None
        except Exception:  # an API whose error shape cannot be built: just close
            answer = None
        if answer is None:
            return Response([], close_after=True)
        return self._respond(header, answer, close=True)

    def _succeeded(self, conn: "Connection") -> None:
        assert self._server is not None and self._server.username is not None
        conn.authenticated(user(self._server.username))
        self.complete = True
        self.metrics.authentications(self.security.name, self._server.mechanism, ok=True)
        log.debug("connection %s from %s authenticated as User:%s with %s", conn.id, conn.peer,
                  self._server.username, self._server.mechanism)

    def _failed(self, conn: "Connection", mechanism: str, reason: str) -> None:
        self.metrics.authentications(self.security.name, mechanism, ok=False)
        log.info("failed authentication of connection %s from %s on listener %s with %s: %s",
                 conn.id, conn.peer, self.security.name, mechanism, reason)
