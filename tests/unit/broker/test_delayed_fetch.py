"""DelayedFetch.can_complete on its own: an append to one partition of a 10,000-partition wait
looks at that partition only (a stand-in replica manager counts the reads)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from broker.log.segment import FileRegion
from broker.replica.delayed_fetch import DelayedFetch
from broker.apis.fetch_session import CachedPartition


@dataclass
class FakeLog:
    high_watermark: int = 0
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return self.high_watermark


@dataclass
class FakePartition:
    log: FakeLog = field(default_factory=FakeLog)
    size: int = 0  # bytes past offset 0


class FakeReplicas:
    def __init__(self, n: int) -> None:
        self.parts = {("t", i): FakePartition() for i in range(n)}
        self.gets = 0
        self.reads = 0

    def get(self, topic: str, partition: int):
        self.gets += 1
        return self.parts.get((topic, partition))

    def read(self, part, offset: int, max_bytes: int, min_one: bool):
        self.reads += 1
        return FileRegion(0, 0, part.size) if part.size else None


def run(coro):
    return asyncio.run(coro)


def test_only_the_touched_partition_is_read():
    async def go():
        rm = FakeReplicas(10_000)
        cps = {("t", i): CachedPartition("t", None, i, 0, 1000) for i in range(10_000)}
        op = DelayedFetch(rm, cps.get, {}, min_bytes=300)
        assert not op.can_complete(None)
        assert rm.gets == 0 and rm.reads == 0  # the first check costs nothing per partition
        p = rm.parts[("t", 7)]
        p.log.high_watermark, p.size = 1, 200
        assert not op.can_complete(("t", 7))  # 200 < 300
        assert (rm.gets, rm.reads) == (1, 1)
        p.log.high_watermark, p.size = 2, 400
        assert op.can_complete(("t", 7))  # capped at max_bytes 1000: 400 counted once, not 600
        assert op.accumulated == 400
        other = DelayedFetch(rm, cps.get, {}, min_bytes=1)
        assert not other.can_complete(("t", 8))  # watermark not past the fetch offset: no read
        assert rm.reads == 2

    run(go())


def test_partition_gone_or_truncated_completes():
    async def go():
        rm = FakeReplicas(2)
        cps = {("t", i): CachedPartition("t", None, i, 5, 1000) for i in range(2)}
        rm.parts[("t", 0)].log.high_watermark = 5
        op = DelayedFetch(rm, cps.get, {}, min_bytes=10)
        del rm.parts[("t", 1)]
        assert op.can_complete(("t", 1))
        op = DelayedFetch(rm, cps.get, {}, min_bytes=10)
        rm.parts[("t", 0)].log.high_watermark = 3  # truncated below the fetch offset
        assert op.can_complete(("t", 0))

    run(go())
