"""One client connection: length-prefixed frames in, responses out in request order.

Kafka processes one request per connection at a time (the channel is muted until the response
is sent), which keeps responses in order without bookkeeping; this loop does the same, except that
an acks=all Produce parked for its followers lets the next request be read (answers still leave in
request order: see "pipelining" below). A frame
that cannot be parsed, or one larger than socket.request.max.bytes, closes only this connection.

Reads carry no timer of their own: the connection notes when bytes last arrived (`last_read`) and
the server's reaper closes connections silent for connections.max.idle.ms, between frames or in
the middle of one, as Kafka's selector expires idle channels. A frame's size is taken from the
broker-wide request memory pool (queued.max.request.bytes) before its body is read.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import struct
import time
from typing import TYPE_CHECKING, Callable, Protocol

from prometheus_client import Counter, Gauge

from broker.network.memory_pool import RequestMemoryPool
from broker.protocol.response import Response
from broker.protocol import codec
from broker.security.authenticator import SaslAuthenticator, SaslDispatcher, reauthenticator
from broker.security.principal import ANONYMOUS, KafkaPrincipal
from broker.security.reauthentication import SessionExpired

if TYPE_CHECKING:
    from broker.security.listeners import ListenerSecurity

log = logging.getLogger(__name__)
_ids = itertools.count(1)
_SIZE = struct.Struct(">i")
_TLS_PIECE = 256 * 1024
# Parked Produce requests one connection may have before reading waits for their answers (the
# Java producer keeps at most 5 in flight, librdkafka's idempotent producer 5).
MAX_PARKED_PRODUCES = 8


class NetworkMetrics(Protocol):
    """What the network layer counts (broker/server/metrics.py's BrokerMetrics has it)."""

    sendfile_bytes: Counter
    connections: Gauge
    request_memory_used: Gauge

    def authentications(self, listener: str, mechanism: str, ok: bool) -> None: ...


class Dispatcher(SaslDispatcher, Protocol):
    """What the network layer calls to have a request answered (broker/apis/dispatcher.py's
    RequestDispatcher is the one): declared here, so nothing of the network imports the server."""

    metrics: NetworkMetrics

    async def dispatch(self, conn: "Connection", frame: bytes) -> Response | None: ...


class _FdFile:
    """The minimal file object loop.sendfile() needs, over a segment's shared descriptor."""

    mode = "rb"

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def fileno(self) -> int:
        return self._fd

    def seek(self, *_args) -> None:  # offsets are explicit; nothing to move
        return None


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        dispatcher: Dispatcher,
        max_request_bytes: int,
        idle_timeout_s: float,
        listener_name: str,
        memory_pool: RequestMemoryPool | None = None,
        security: "ListenerSecurity | None" = None,
        principal: KafkaPrincipal = ANONYMOUS,
    ) -> None:
        self.id = next(_ids)
        self.reader = reader
        self.writer = writer
        self.dispatcher = dispatcher
        self.max_request_bytes = max_request_bytes
        self.idle_timeout_s = idle_timeout_s
        self.listener_name = listener_name
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.memory_pool = memory_pool or RequestMemoryPool(-1)
        self.closing = False
        self.busy = False  # a request is being handled or its response sent (or waits for memory)
        self._pending = 0  # parked Produce requests whose answers are not sent yet
        self._answering: asyncio.Task | None = None  # sends those answers, in request order
        self._parked: set[asyncio.Task] = set()  # their handlers, cancelled if the connection ends
        # Set while a Produce is handled: the dispatcher calls it when the request parks.
        self.on_park: Callable[[], object] | None = None
        self.in_frame = False  # a frame's length has been read, its body not yet all
        self.last_read = asyncio.get_running_loop().time()
        # Quota throttling (KIP-13) mutes a connection until this loop time.
        self.muted_until = 0.0
        # The broker a follower fetch on this connection proved it to be (follower_identity), if any.
        self.broker_id: int | None = None
        self.sendfile_bytes = dispatcher.metrics.sendfile_bytes.inc
        self._socket_fd: int | None = None  # the socket's descriptor, for sendfile() (plain TCP only)
        # Who the client is (broker/security/principal.py): ANONYMOUS, the mTLS subject, or the SASL user.
        self.principal = principal
        # Its authorizer session (broker/security/authz_session.py), made at its first request.
        self.authz = None
        # TLS connections cannot sendfile(): file regions go through the TLS layer as bytes.
        self.tls = security is not None and security.tls
        # On a SASL listener, frames go to the authenticator until it succeeds (broker/security/authenticator.py),
        # with Kafka's smaller frame limit until then (sasl.server.max.receive.size).
        self.authenticator = None
        # A SASL authentication that lasts connections.max.reauth.ms (broker/security/reauthentication.py).
        self.sasl_session = None
        self._request_max_bytes = max_request_bytes
        if security is not None and security.sasl:
            self.authenticator = SaslAuthenticator(security, dispatcher.metrics)
            self.max_request_bytes = min(max_request_bytes, security.max_receive_size)

    def authenticated(self, principal: KafkaPrincipal) -> None:
        """SASL succeeded: from the next frame on, requests go to the dispatcher as `principal`."""
        self.principal = principal
        self.authenticator = None
        self.max_request_bytes = self._request_max_bytes

    async def serve(self) -> None:
        try:
            while not self.closing:
                # KIP-219: a throttled client's next request waits until its throttle time is over
                # (also after acks=0 produce requests, which get no response).
                delay = self.muted_until - asyncio.get_running_loop().time()
                if delay > 0:
                    await asyncio.sleep(delay)
                if self._pending >= MAX_PARKED_PRODUCES:
                    await self._answers_before()
                frame = await self._read_frame()
                if frame is None:
                    return
                self.busy = True
                try:
                    if self._may_pipeline(frame):
                        response, parked = await self._answer_until_parked(frame)
                        if parked is not None:  # answered in turn later; read the next request now
                            self._answering = asyncio.create_task(self._send_in_turn(self._answering, parked))
                            continue
                    else:
                        try:
                            response = await self._answer(frame)
                        finally:
                            self.memory_pool.release(len(frame))
                    await self._answers_before()
                    if response is not None:
                        await self._send_timed(response)
                finally:
                    self.busy = False
                if response is not None and response.close_after:
                    return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except codec.MalformedRequest as e:
            log.warning("closing connection %s from %s: malformed request: %s", self.id, self.peer, e)
        except SessionExpired as e:
            log.info("closing connection %s from %s: %s", self.id, self.peer, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection %s from %s after an unexpected error", self.id, self.peer)
        finally:
            await self.close()

    async def _answer(self, frame: bytes) -> Response | None:
        if self.authenticator is None and self.sasl_session is not None:  # KIP-368
            self.authenticator = reauthenticator(self.sasl_session, frame, self.dispatcher.metrics)
        if self.authenticator is not None:
            return await self.authenticator.receive(self, frame)
        return await self.dispatcher.dispatch(self, frame)

    # -- produce requests answered in turn while the next is read (pipelining) -----------------
    # An acks=all Produce spends most of its time parked until the followers have its batches.
    # Kafka mutes a connection until its answer is sent, so a producer's next requests (up to
    # max.in.flight of them) queue in the socket behind that wait, one wait after another. Here,
    # once a Produce has appended and parked, the next request is read and handled; answers still
    # go out in request order and appends happen in request order (a Produce parks only after all
    # its appends), which is all the protocol promises ("processed in the order sent").
    def _may_pipeline(self, frame: bytes) -> bool:
        return (self.authenticator is None and self.sasl_session is None and len(frame) >= 2
                and frame[0] == 0 and frame[1] == 0)  # api key 0: Produce

    async def _answer_until_parked(self, frame: bytes) -> tuple[Response | None, asyncio.Task | None]:
        """(response, None) if answered before parking; (None, the task still answering) if parked."""
        loop = asyncio.get_running_loop()
        parked = loop.create_future()
        self.on_park = lambda: parked.done() or parked.set_result(None)
        task = loop.create_task(self._answer_releasing(frame))
        try:
            await asyncio.wait((task, parked), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self.on_park = None
        if task.done():
            return task.result(), None
        self._pending += 1
        self._parked.add(task)
        task.add_done_callback(self._parked.discard)
        return None, task

    async def _answer_releasing(self, frame: bytes) -> Response | None:
        try:
            return await self._answer(frame)
        finally:
            self.memory_pool.release(len(frame))

    async def _send_in_turn(self, before: asyncio.Task | None, answering: asyncio.Task) -> None:
        """Sends a parked request's answer once every earlier answer is out."""
        try:
            if before is not None:
                await before
            response = await answering
            if response is not None:
                await self._send_timed(response)
                if response.close_after:
                    await self.close()
        finally:
            self._pending -= 1

    async def _answers_before(self) -> None:
        """Waits until the answers of parked earlier requests are sent (an error there ends the
        connection as it would have inline)."""
        if self._answering is not None:
            answering, self._answering = self._answering, None
            await answering

    async def _send_timed(self, response: Response) -> None:
        send_started = time.perf_counter_ns()
        await self._send(response)
        if response.on_sent is not None:
            response.on_sent(send_started, time.perf_counter_ns())

    async def _read_frame(self) -> bytes | None:
        try:
            head = await self.reader.readexactly(4)
        except asyncio.IncompleteReadError:
            return None
        loop = asyncio.get_running_loop()
        self.last_read = loop.time()
        (size,) = _SIZE.unpack(head)
        if size < 0 or size > self.max_request_bytes:
            raise codec.MalformedRequest(
                f"frame of {size} bytes is outside 0..{self.max_request_bytes} (socket.request.max.bytes)")
        if size == 0:
            return b""
        self.busy = True  # waiting for memory is the broker's doing, not an idle client
        try:
            await self.memory_pool.acquire(size)
        finally:
            self.busy = False
        self.last_read = loop.time()
        self.in_frame = True
        try:
            chunk = await self.reader.read(size)
            if len(chunk) == size:
                return chunk
            body = bytearray(chunk)
            while chunk and len(body) < size:
                self.last_read = loop.time()
                chunk = await self.reader.read(size - len(body))
                body += chunk
            if len(body) < size:
                raise asyncio.IncompleteReadError(bytes(body), size)
            return bytes(body)
        except BaseException:
            self.memory_pool.release(size)
            raise
        finally:
            self.in_frame = False

    def idle_for(self, now: float) -> float:
        """Seconds since bytes last arrived, or 0 while a request is in hand or waits for memory; a
        connection muted by a quota throttle (KIP-219) counts as idle only from the end of its mute."""
        return 0.0 if self.busy or self._pending or self.closing else now - max(self.last_read, self.muted_until)

    async def _send(self, response: Response) -> None:
        loop = asyncio.get_running_loop()
        for chunk in response.chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                self.writer.write(chunk)
            elif self.tls:
                await self._send_region_through_tls(chunk)
            else:
                sent = self._sendfile_now(chunk)
                if sent < chunk.length:
                    await self.writer.drain()
                    # fallback=False: record bytes must never be copied through Python buffers.
                    sent += await loop.sendfile(self.writer.transport, _FdFile(chunk.fd), chunk.position + sent,
                                                chunk.length - sent, fallback=False)
                self.sendfile_bytes(sent)
        await self.writer.drain()

    def _sendfile_now(self, region) -> int:
        """sendfile() straight to the socket while nothing waits in the transport's buffer (the bytes
        before the region went out): no drain, no pause and resume of reading, no future, which the
        event loop's own sendfile costs per region and a fetch of many partitions has one region each.
        Returns the bytes sent; the rest (a full socket buffer) goes through loop.sendfile."""
        transport = self.writer.transport
        if transport.get_write_buffer_size() or transport.is_closing():
            return 0
        if self._socket_fd is None:
            sock = transport.get_extra_info("socket")
            self._socket_fd = sock.fileno() if sock is not None else -1
        if self._socket_fd < 0:
            return 0
        try:
            return os.sendfile(self._socket_fd, region.fd, region.position, region.length)
        except (BlockingIOError, InterruptedError):
            return 0

    async def _send_region_through_tls(self, region) -> None:
        """A file region read and written in pieces: TLS encrypts in user space, so no sendfile()
        (Kafka loses zero-copy on SSL listeners too)."""
        position, end = region.position, region.position + region.length
        while position < end:
            data = os.pread(region.fd, min(_TLS_PIECE, end - position), position)
            if not data:
                raise ConnectionError(f"segment file ended at {position} inside a region ending at {end}")
            self.writer.write(data)
            position += len(data)
            await self.writer.drain()

    async def close(self) -> None:
        self.closing = True
        for task in list(self._parked) + ([self._answering] if self._answering is not None else []):
            if task is not asyncio.current_task():
                task.cancel()
        try:
            self.writer.close()
            # TLS waits for the peer's close_notify, which an idle or vanished client never sends:
            # give it a second, then drop the connection.
            await asyncio.wait_for(self.writer.wait_closed(), 1 if self.tls else 5)
        except Exception:
            if self.tls:
                self.writer.transport.abort()
