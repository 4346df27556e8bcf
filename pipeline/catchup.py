"""Catch-up mode's bounded job: the dead-letter query's open ranges, processed beside the stream.

`run --catch-up parallel` restarts the dead-letter query at the log end (`gaps.plan_restart`) and
starts this job in a thread of the same driver. It reads each partition's first open range in
chunks (a Spark batch read with explicit starting and ending offsets, at most `chunk` offsets per
partition), runs the stream's own `check` and `dead_letters` on them, writes the rows to the
dead-letter topic, and only then records the ranges' progress in the catch-up file. A crash
mid-chunk therefore repeats at most that chunk: at-least-once, and the repeated dead letters are
byte-identical copies that readers collapse by their source headers (docs/pipeline.md).

Its Spark jobs run in their own pool of the FAIR scheduler, so the stream's micro-batches of
fresh records take turns with the chunks instead of queueing behind them.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Callable

from pipeline.gaps import QUERY, GapLedger

POOL = "catch-up"
POOLS_XML = f"""<?xml version="1.0"?>
<!-- Written by pipeline/catchup.py: the gap's Spark jobs in a pool of their own, the stream's in
     the default pool, equal weights: fresh micro-batches and gap chunks take turns. -->
<allocations>
  <pool name="{POOL}"><schedulingMode>FIFO</schedulingMode><weight>1</weight><minShare>0</minShare></pool>
</allocations>
"""


def scheduler_conf(directory: Path) -> dict[str, str]:
    """Spark settings for catch-up mode: the FAIR scheduler with the gap's pool declared."""
    directory.mkdir(parents=True, exist_ok=True)
    pools = directory / "fairscheduler.xml"
    if not pools.exists() or pools.read_text() != POOLS_XML:
        pools.write_text(POOLS_XML)
    return {"spark.scheduler.mode": "FAIR", "spark.scheduler.allocation.file": str(pools)}


class GapJob(threading.Thread):
    """Works through `ledger`'s open ranges until they are done or `stop` is set (between chunks)."""

    def __init__(self, spark, bootstrap: str, dead_letter_topic: str, ledger: GapLedger, chunk: int,
                 emit: Callable[[dict], None]):
        super().__init__(name="catch-up", daemon=True)
        if chunk <= 0:
            raise ValueError(f"catch-up chunk must be positive, got {chunk}")
        self.spark, self.bootstrap, self.dead_letter_topic = spark, bootstrap, dead_letter_topic
        self.ledger, self.chunk, self.emit = ledger, chunk, emit
        self.lock = threading.Lock()  # the ledger: this thread moves it, the driver's loop reads it
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.offsets_done = 0

    def checkpointed(self) -> tuple[dict[int, int], bool]:
        """Per partition, the offset below which the dead-letter query's ranges are processed
        (the primary's start where none is open); and whether every range is done."""
        with self.lock:
            return ({p: pr.committed() for p, pr in self.ledger.partitions.items()}, self.ledger.done())

    def run(self) -> None:
        from pipeline import transform

        try:
            self.spark.sparkContext.setLocalProperty("spark.scheduler.pool", POOL)
            products = transform.catalog(self.spark)
            t0 = time.monotonic()
            while not self.stop.is_set():
                with self.lock:
                    spans = {p: (pr.ranges[0].next, min(pr.ranges[0].end, pr.ranges[0].next + self.chunk))
                             for p, pr in self.ledger.partitions.items() if pr.ranges}
                if not spans:
                    break
                self._write_dead_letters(spans, products)
                with self.lock:
                    for p, (_, end) in spans.items():
                        self.ledger.partitions[p].commit(end)
                    self.ledger.save()
                    self.offsets_done += sum(end - start for start, end in spans.values())
                    elapsed = time.monotonic() - t0
                    self.emit({"event": "catch-up", "query": QUERY, "chunk": {str(p): list(s) for p, s in spans.items()},
                               "offsets_done": self.offsets_done,
                               "offsets_per_second": round(self.offsets_done / elapsed, 1) if elapsed > 0 else None,
                               "records_left": self.ledger.records_left(), "open_ranges": self.ledger.describe(),
                               "done": self.ledger.done()})
        except BaseException as e:  # reported by the driver's loop, which fails the run
            self.error = e

    def _write_dead_letters(self, spans: dict[int, tuple[int, int]], products) -> None:
        from pipeline import transform

        topic = self.ledger.topic
        raw = (
            self.spark.read.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("assign", json.dumps({topic: sorted(spans)}))
            .option("startingOffsets", json.dumps({topic: {str(p): s for p, (s, _) in spans.items()}}))
            .option("endingOffsets", json.dumps({topic: {str(p): e for p, (_, e) in spans.items()}}))
            .load()
        )
        (
            transform.dead_letters(transform.check(raw, products))
            .write.format("kafka")
            .option("kafka.bootstrap.servers", self.bootstrap)
            .option("topic", self.dead_letter_topic)
            .save()
        )


def line(event: dict) -> str:
    """The progress line of one chunk."""
    ranges = sum(len(v) for v in event["open_ranges"].values())
    rate = f", {event['offsets_per_second']:,.0f} offsets/s" if event.get("offsets_per_second") else ""
    state = "done" if event["done"] else f"{ranges} ranges open, {event['records_left']} records left"
    return f"[{event['query']} catch-up] {event['offsets_done']} offsets of the gap processed{rate}; {state}"
