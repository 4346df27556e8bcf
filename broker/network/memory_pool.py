"""A broker-wide bound on request bytes held in memory (Kafka's queued.max.request.bytes).

A connection takes a frame's size from the pool after reading its 4-byte length and before
reading the body, and gives it back once the request has been handled. While the pool is empty,
connections stop reading (their sockets fill and clients wait: back-pressure). As Kafka's
network pool (SimpleMemoryPool, non-strict) does, a frame is admitted whenever any memory is
left, so a frame larger than what remains still goes through and the pool dips below zero; the
bound is the setting plus one frame of at most socket.request.max.bytes. -1 means unbounded.
"""

from __future__ import annotations

import asyncio


class RequestMemoryPool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.available = capacity
        self._freed: asyncio.Event | None = None

    @property
    def bounded(self) -> bool:
        return self.capacity > 0

    @property
    def used(self) -> int:
        return self.capacity - self.available if self.bounded else 0

    async def acquire(self, size: int) -> None:
        if not self.bounded:
            return
        while self.available <= 0:
            if self._freed is None:
                self._freed = asyncio.Event()
            await self._freed.wait()
        self.available -= size

    def release(self, size: int) -> None:
        if not self.bounded:
            return
        self.available += size
        if self._freed is not None and self.available > 0:
            self._freed.set()
            self._freed = None
