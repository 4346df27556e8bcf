"""One client connection: length-prefixed frames in, responses out in request order.

Kafka processes one request per connection at a time (the channel is muted until the response
is sent), which keeps responses in order without bookkeeping; this loop does the same. A frame
that cannot be parsed, or one larger than socket.request.max.bytes, closes only this connection.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import struct
from typing import TYPE_CHECKING

from broker.network.response import Response
from broker.protocol import codec

if TYPE_CHECKING:
    from broker.server.apis import RequestDispatcher

log = logging.getLogger(__name__)
_ids = itertools.count(1)
_SIZE = struct.Struct(">i")


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
        dispatcher: "RequestDispatcher",
        max_request_bytes: int,
        idle_timeout_s: float,
        listener_name: str,
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
        self.closing = False
        self.busy = False  # a request is being handled or its response sent
        # Quota throttling (KIP-13) mutes a connection until this loop time.
        self.muted_until = 0.0
        self.sendfile_bytes = dispatcher.metrics.sendfile_bytes.inc

    async def serve(self) -> None:
        try:
            while not self.closing:
                frame = await self._read_frame()
                if frame is None:
                    return
                self.busy = True
                try:
                    response = await self.dispatcher.dispatch(self, frame)
                    if response is not None:
                        await self._send(response)
                finally:
                    self.busy = False
                if response is None:
                    continue
                if response.close_after:
                    return
                delay = self.muted_until - asyncio.get_running_loop().time()
                if delay > 0:
                    await asyncio.sleep(delay)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except codec.MalformedRequest as e:
            log.warning("closing connection %s from %s: malformed request: %s", self.id, self.peer, e)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("closing connection %s from %s after an unexpected error", self.id, self.peer)
        finally:
            await self.close()

    async def _read_frame(self) -> bytes | None:
        try:
            head = await asyncio.wait_for(self.reader.readexactly(4), self.idle_timeout_s)
        except asyncio.TimeoutError:
            log.info("closing idle connection %s from %s", self.id, self.peer)
            return None
        except asyncio.IncompleteReadError:
            return None
        (size,) = _SIZE.unpack(head)
        if size < 0 or size > self.max_request_bytes:
            raise codec.MalformedRequest(
                f"frame of {size} bytes is outside 0..{self.max_request_bytes} (socket.request.max.bytes)")
        return await self.reader.readexactly(size)

    async def _send(self, response: Response) -> None:
        loop = asyncio.get_running_loop()
        for chunk in response.chunks:
            if isinstance(chunk, (bytes, bytearray, memoryview)):
                self.writer.write(chunk)
            else:
                await self.writer.drain()
                # fallback=False: record bytes must never be copied through Python buffers.
                sent = await loop.sendfile(self.writer.transport, _FdFile(chunk.fd), chunk.position, chunk.length,
                                           fallback=False)
                self.sendfile_bytes(sent)
        await self.writer.drain()

    async def close(self) -> None:
        self.closing = True
        try:
            self.writer.close()
            await asyncio.wait_for(self.writer.wait_closed(), 5)
        except Exception:
            pass
