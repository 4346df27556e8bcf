"""The dispatcher: api key -> handler, as Kafka's KafkaApis does, with metrics around each call.

socket -> codec (header, body) -> handler -> response bytes. Unsupported versions follow
Kafka: ApiVersions answers UNSUPPORTED_VERSION in a v0 body listing what is supported (KIP-511);
any other API at an unknown version, an unknown API key, or a body that does not parse closes
the connection. A handler that fails answers UNKNOWN_SERVER_ERROR (Handler.error_response).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import logging
import time
from typing import TYPE_CHECKING, Iterable

from kio.schema.errors import ErrorCode

from broker.protocol.response import Response
from broker.protocol import codec
from broker.security.authz_session import AuthzSession, peer_host
from broker.security.principal import ANONYMOUS
from broker.apis.handlers.base import Handler, RequestContext, RequestRefused
from broker.apis.handlers.fetch import replica_id_of
from broker.apis.request_stages import RequestStages
from broker.replica.purgatory import PARKED

if TYPE_CHECKING:
    from broker.network.connection import Connection
    from broker.security.authorizer import StandardAuthorizer
    from broker.server.metrics import BrokerMetrics
    from broker.quotas.quota_manager import QuotaManagers

log = logging.getLogger(__name__)


class RequestDispatcher:
    def __init__(self, handlers: Iterable[Handler], metrics: "BrokerMetrics") -> None:
        self.handlers: dict[int, Handler] = {}
        self.supported: dict[int, tuple[int, int]] = {}
        for h in handlers:
            kio_range = codec.kio_versions(h.api_key)
            assert kio_range is not None, h
            lo, hi = max(h.min_version, kio_range[0]), min(h.max_version, kio_range[1])
            self.handlers[h.api_key] = h
            self.supported[h.api_key] = (lo, hi)
        self.metrics = metrics
        self.quotas: "QuotaManagers | None" = None  # KIP-13, set by the broker
        # authorizer.class.name: set by the broker with the counter of its denials
        self.authorizer: "StandardAuthorizer | None" = None
        self.authz_denials = None

    async def dispatch(self, conn: "Connection", frame: bytes) -> Response | None:
        received_ns = time.perf_counter_ns()  # request time (KIP-124) includes parsing
        try:
            header = codec.parse_header(frame, self.supported)
        except codec.UnsupportedVersion as e:
            if e.api_key == codec.API_VERSIONS_KEY:
                return self._unsupported_api_versions(frame)
            self.metrics.malformed_frames.inc()
            raise codec.MalformedRequest(f"{codec.api_name(e.api_key)}: {e}") from None
        except codec.MalformedRequest:
            self.metrics.malformed_frames.inc()
            raise
        try:
            body = codec.parse_body(frame, header)
        except codec.MalformedRequest:
            self.metrics.malformed_frames.inc()
            raise
        api = codec.api_name(header.api_key)
        handler = self.handlers[header.api_key]
        principal = getattr(conn, "principal", ANONYMOUS)
        ctx = RequestContext(header, conn, request_size=len(frame), started_ns=received_ns, user=principal.name)
        if self.authorizer is not None:
            ctx.authz = self._authz_session(conn, principal)
        started = time.perf_counter()
        api_metrics = self.metrics.api(api)
        api_metrics.requests.inc()
        stages = RequestStages(self._stage_metrics(api, api_metrics, body), received_ns)
        stages.parked.on_park = getattr(conn, "on_park", None)
        stages.handler_started()
        parked = PARKED.set(stages.parked)
        try:
            result = await handler.handle(ctx, body)
            if result is None or isinstance(result, Response):
                self._throttle(ctx)  # hand-encoded answers already carry their throttle time
                stages.handler_ended()
                if result is None:
                    stages.unanswered()
                else:
                    result.on_sent = stages.sent
                return result
            body_bytes = codec.encode_body(header.api_key, header.api_version, self._throttle(ctx, result))
        except RequestRefused as e:
            log.info("%s v%d from %s refused: %s", api, header.api_version, conn.peer, e.message)
            error = handler.error_response(ctx, body, e.code, e.message)
            if error is None:
                return Response([], close_after=True)
            body_bytes = codec.encode_body(header.api_key, header.api_version, self._throttle(ctx, error))
        except Exception as e:
            # As Kafka's KafkaApis: log it and answer UNKNOWN_SERVER_ERROR in this API's shape.
            api_metrics.errors.inc()
            log.exception("%s v%d from %s failed; answering UNKNOWN_SERVER_ERROR", api, header.api_version, conn.peer)
            error = handler.error_response(ctx, body, ErrorCode.unknown_server_error, f"{type(e).__name__}: {e}")
            if error is None:  # no response expected (acks=0): close so the client refreshes metadata
                return Response([], close_after=True)
            body_bytes = codec.encode_body(header.api_key, header.api_version, self._throttle(ctx, error))
        finally:
            PARKED.reset(parked)
            api_metrics.latency.observe(time.perf_counter() - started)
        stages.handler_ended()
        return Response([codec.frame_response(header, body_bytes)], on_sent=stages.sent)

    def _stage_metrics(self, api: str, api_metrics, body):
        """The stage histograms: Kafka's RequestMetrics tell a follower's Fetch from a consumer's
        (FetchFollower, FetchConsumer), whose waits mean different things."""
        if api != "fetch":
            return api_metrics.stages
        return self.metrics.api("fetch_follower" if replica_id_of(body) >= 0 else "fetch_consumer").stages

    def error_answer(self, conn: "Connection", header: codec.RequestHeader, body, code: ErrorCode, message: str):
        """The API's own answer carrying `code` (Handler.error_response, Kafka's getErrorResponse), for
        a request refused before it reached its handler (SASL authentication); None for an API not
        served here or one that answers nothing."""
        handler = self.handlers.get(header.api_key)
        return None if handler is None else handler.error_response(RequestContext(header, conn), body, code, message)

    def _authz_session(self, conn: "Connection", principal) -> AuthzSession:
        """The connection's authorizer session, made at its first request (after SASL)."""
        session = getattr(conn, "authz", None)
        if session is None or session.principal != str(principal):
            session = AuthzSession(self.authorizer, str(principal), peer_host(conn.peer), self.authz_denials)
            conn.authz = session
        return session

    def _throttle(self, ctx: RequestContext, body=None):
        """KIP-13/124/219: record the request's handler time against its request quota, put the
        largest throttle time any quota asked for into the response's throttle_time_ms (every
        response that has the field) and mute the connection that long after the response is sent."""
        q = self.quotas
        if q is not None:
            request_ms = q.request_throttle_ms(ctx)
            ctx.throttle_ms = max(ctx.throttle_ms, request_ms)
        if ctx.throttle_ms <= 0:
            return body
        conn = ctx.connection
        until = asyncio.get_running_loop().time() + ctx.throttle_ms / 1000.0
        if until > conn.muted_until:
            conn.muted_until = until
        if body is not None and "throttle_time" in getattr(body, "__dataclass_fields__", ()):
            body = dataclasses.replace(body, throttle_time=datetime.timedelta(milliseconds=ctx.throttle_ms))
        return body

    def _unsupported_api_versions(self, frame: bytes) -> Response:
        """KIP-511: answer an ApiVersions request of a version we don't know with a v0 body."""
        import struct

        correlation_id = struct.unpack_from(">i", frame, 4)[0]
        m = codec.response_module(codec.API_VERSIONS_KEY, 0)
        body = m.ApiVersionsResponse(
            error_code=ErrorCode.unsupported_version,
            api_keys=tuple(m.ApiVersion(api_key=k, min_version=lo, max_version=hi)
                           for k, (lo, hi) in sorted(self.supported.items())),
        )
        header = codec.RequestHeader(codec.API_VERSIONS_KEY, 0, correlation_id, None, 0)
        return Response([codec.frame_response(header, codec.encode_body(codec.API_VERSIONS_KEY, 0, body))])


def throttle(ms: int = 0) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=ms)
