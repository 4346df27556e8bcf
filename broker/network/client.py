"""A Kafka-protocol client connection, for what brokers ask each other (the replica fetcher's
Fetch and OffsetForLeaderEpoch): kio's request types written with the right request header,
one request in flight at a time, responses read with kio's readers. With an InterBrokerClient
(broker/security/inter_broker_client.py) the connection is TLS and/or SASL-authenticated as the
inter-broker listener asks, before any other request.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import socket
import ssl
import struct
from typing import Any

import kio.serial as kser
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.static.primitive import i16, i32

from broker.protocol import codec

_INT32 = struct.Struct(">i")

# A network cut that drops packets silently (no reset) ends the connection within seconds, not
# after TCP's retransmissions or the 30 s request timeout (issue 35: replication resumed only
# 10-13 s after such a cut healed): the kernel closes it when data it sent stays unacknowledged
# for USER_TIMEOUT_MS, or when the peer answers no keep-alive probe after KEEPALIVE_IDLE_S of
# silence. Probes and acknowledgements come from the peer's kernel, so a busy peer is not cut.
KEEPALIVE_IDLE_S = 2
KEEPALIVE_INTERVAL_S = 1
KEEPALIVE_COUNT = 3
USER_TIMEOUT_MS = 6000


def detect_silent_cuts(sock: socket.socket | None) -> None:
    """Keep-alive probes and a user timeout on a connection (Linux options; others: no-op)."""
    if sock is None:
        return
    options = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)]
    for name, value in (("TCP_KEEPIDLE", KEEPALIVE_IDLE_S), ("TCP_KEEPINTVL", KEEPALIVE_INTERVAL_S),
                        ("TCP_KEEPCNT", KEEPALIVE_COUNT), ("TCP_USER_TIMEOUT", USER_TIMEOUT_MS)):
        if hasattr(socket, name):
            options.append((socket.IPPROTO_TCP, getattr(socket, name), value))
    for level, option, value in options:
        try:
            sock.setsockopt(level, option, value)
        except OSError:
            pass


class ClientError(ConnectionError):
    """The peer could not be reached, closed the connection, or answered something unreadable."""


class AuthenticationFailed(ClientError):
    """The peer refused this broker's TLS handshake or SASL credentials on the inter-broker listener."""


class KafkaConnection:
    def __init__(self, host: str, port: int, client_id: str, security: Any = None) -> None:
        self.host, self.port, self.client_id, self.security = host, port, client_id, security
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._ids = itertools.count(1)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def connect(self, timeout_s: float) -> None:
        sec = self.security
        tls: dict[str, Any] = {}
        if sec is not None and sec.ssl_context is not None:
            tls = {"ssl": sec.ssl_context, "server_hostname": self.host.strip("[]")}
        where = f"{self.address} (listener {sec.listener})" if sec is not None else self.address
        try:
            self._reader, self._writer = await asyncio.wait_for(
                asyncio.open_connection(self.host, self.port, **tls), timeout_s)
        except ssl.SSLError as e:
            raise AuthenticationFailed(f"TLS handshake with {where} failed: {e.reason or e}") from None
        except (OSError, asyncio.TimeoutError) as e:
            raise ClientError(f"cannot connect to {where}: {e or type(e).__name__}") from None
        detect_silent_cuts(self._writer.get_extra_info("socket"))
        if sec is not None and sec.sasl:
            from broker.security.sasl_client import SaslAuthenticationFailed, authenticate

            try:
                await authenticate(lambda req: self.request(req, timeout_s), sec.mechanism, sec.username,
                                   sec.password, where)
            except SaslAuthenticationFailed as e:
                self.close()
                raise AuthenticationFailed(str(e)) from None

    async def request(self, req: Any, timeout_s: float) -> Any:
        """Send `req` (a kio request of some version) and return kio's response of that version."""
        if self._writer is None:
            raise ClientError(f"not connected to {self.address}")
        t = type(req)
        correlation_id = next(self._ids)
        header_type = RequestHeaderV2 if t.__flexible__ else RequestHeaderV1
        header = header_type(request_api_key=i16(t.__api_key__), request_api_version=i16(t.__version__),
                             correlation_id=i32(correlation_id), client_id=self.client_id)
        buf = io.BytesIO()
        kser.entity_writer(header_type)(buf, header)
        kser.entity_writer(t)(buf, req)
        payload = buf.getvalue()
        try:
            self._writer.write(_INT32.pack(len(payload)) + payload)
            await self._writer.drain()
            size = _INT32.unpack(await asyncio.wait_for(self._reader.readexactly(4), timeout_s))[0]
            frame = await asyncio.wait_for(self._reader.readexactly(size), timeout_s)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            self.close()
            raise ClientError(f"{self.address} did not answer {t.__name__}: {e or type(e).__name__}") from None
        (got,) = _INT32.unpack_from(frame, 0)
        if got != correlation_id:
            self.close()
            raise ClientError(f"{self.address} answered correlation id {got}, expected {correlation_id}")
        pos = 4
        if t.__flexible__:  # response header v1: tagged fields after the correlation id
            try:
                count, pos = codec._read_uvarint(frame, pos)
                for _ in range(count):
                    _, pos = codec._read_uvarint(frame, pos)
                    n, pos = codec._read_uvarint(frame, pos)
                    pos += n
            except codec.MalformedRequest as e:
                self.close()
                raise ClientError(f"{self.address}: unreadable response header: {e}") from None
        response_type = codec.response_type(int(t.__api_key__), int(t.__version__))
        try:
            body, _ = kser.entity_reader(response_type)(frame, pos)
        except Exception as e:
            self.close()
            raise ClientError(f"{self.address}: unreadable {response_type.__name__}: {e}") from None
        return body

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._writer = self._reader = None
