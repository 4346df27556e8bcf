"""Issue 44: a Produce parked for its followers does not hold its connection: the next request is
read and handled meanwhile, and the answers still leave in request order. Over a real loopback
socket, with a stand-in dispatcher whose Produce parks until the test releases it."""

from __future__ import annotations

import asyncio
import struct

from prometheus_client import CollectorRegistry, Counter

from broker.network.connection import Connection
from broker.protocol.response import Response

PRODUCE, METADATA = 0, 3


class Metrics:
    def __init__(self) -> None:
        self.sendfile_bytes = Counter("sendfile", "x", registry=CollectorRegistry())


class ParkingDispatcher:
    """Frames are (api key: int16, id: int32). A Produce parks (telling the connection, as the
    real dispatcher's purgatory does) until its id's event is set; everything else answers at once."""

    def __init__(self) -> None:
        self.metrics = Metrics()
        self.handled: list[int] = []
        self.release: dict[int, asyncio.Event] = {}

    async def dispatch(self, conn: Connection, frame: bytes) -> Response | None:
        api, ident = struct.unpack(">hi", frame)
        self.handled.append(ident)
        on_park = conn.on_park
        if api == PRODUCE and ident in self.release:
            on_park()
            await self.release[ident].wait()
        body = struct.pack(">i", ident)
        return Response([struct.pack(">i", len(body)) + body])


async def answers(reader: asyncio.StreamReader, n: int) -> list[int]:
    out = []
    for _ in range(n):
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        out.append(struct.unpack(">i", await reader.readexactly(size))[0])
    return out


def frame(api: int, ident: int) -> bytes:
    body = struct.pack(">hi", api, ident)
    return struct.pack(">i", len(body)) + body


async def serving(dispatcher: ParkingDispatcher):
    async def on_client(reader, writer):
        await Connection(reader, writer, dispatcher, 1 << 20, 60.0, "PLAINTEXT").serve()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    return server, reader, writer


async def until(condition, what: str) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"never happened: {what}")


async def test_requests_behind_a_parked_produce_are_handled_and_answered_in_order():
    d = ParkingDispatcher()
    d.release = {1: asyncio.Event(), 2: asyncio.Event()}
    server, reader, writer = await serving(d)
    try:
        writer.write(frame(PRODUCE, 1) + frame(PRODUCE, 2) + frame(METADATA, 3) + frame(PRODUCE, 4))
        await writer.drain()
        # The Metadata request is handled while both produces are parked; it is not a Produce, so
        # the connection then waits for their answers before reading on, as Kafka would.
        await until(lambda: d.handled == [1, 2, 3], "the requests behind the parked produces handled")
        early = asyncio.ensure_future(answers(reader, 1))
        await asyncio.sleep(0.05)
        assert not early.done() and d.handled == [1, 2, 3]  # nothing overtakes the parked first answer
        d.release[2].set()  # the second completes first ...
        await asyncio.sleep(0.05)
        assert not early.done()
        d.release[1].set()  # ... and still goes out after the first
        assert await early == [1]
        assert await answers(reader, 3) == [2, 3, 4]
        assert d.handled == [1, 2, 3, 4]
    finally:
        writer.close()
        server.close()


async def test_a_produce_that_does_not_park_is_answered_inline():
    d = ParkingDispatcher()
    server, reader, writer = await serving(d)
    try:
        writer.write(frame(PRODUCE, 7) + frame(METADATA, 8))
        await writer.drain()
        assert await answers(reader, 2) == [7, 8]
    finally:
        writer.close()
        server.close()


async def test_a_client_that_leaves_with_produces_parked_leaves_nothing_running():
    d = ParkingDispatcher()
    d.release = {1: asyncio.Event()}
    server, reader, writer = await serving(d)
    before = len(asyncio.all_tasks())
    writer.write(frame(PRODUCE, 1))
    await writer.drain()
    await until(lambda: d.handled == [1], "the produce handled")
    writer.close()
    await until(lambda: len(asyncio.all_tasks()) <= before - 1, "the connection's tasks ended")
    server.close()


async def test_parked_produces_per_connection_are_bounded():
    from broker.network.connection import MAX_PARKED_PRODUCES

    d = ParkingDispatcher()
    n = MAX_PARKED_PRODUCES + 2
    d.release = {i: asyncio.Event() for i in range(n)}
    server, reader, writer = await serving(d)
    try:
        writer.write(b"".join(frame(PRODUCE, i) for i in range(n)))
        await writer.drain()
        await until(lambda: len(d.handled) == MAX_PARKED_PRODUCES, "the bound reached")
        await asyncio.sleep(0.05)
        assert len(d.handled) == MAX_PARKED_PRODUCES  # the next waits until the first answers are out
        for e in d.release.values():
            e.set()
        assert await answers(reader, n) == list(range(n))
    finally:
        writer.close()
        server.close()
