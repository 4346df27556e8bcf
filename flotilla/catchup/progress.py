"""What the catch-up consumer reports about itself: open ranges, records left in gaps, catch-up rate
and freshness (age of the newest record delivered), as numbers and as one progress line."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from flotilla.catchup.ranges import PartitionRanges


@dataclass
class Progress:
    """Counts kept as records are delivered; `snapshot()` adds what the range state says."""

    clock: Callable[[], float] = time.time
    delivered_primary: int = 0
    delivered_catchup: int = 0
    newest_timestamp_ms: int | None = None
    _catchup_since: float | None = field(default=None, repr=False)

    def delivered(self, source: str, timestamp_ms: int | None) -> None:
        if source == "catchup":
            self.delivered_catchup += 1
            if self._catchup_since is None:
                self._catchup_since = self.clock()
        else:
            self.delivered_primary += 1
        if timestamp_ms is not None and timestamp_ms > 0:
            if self.newest_timestamp_ms is None or timestamp_ms > self.newest_timestamp_ms:
                self.newest_timestamp_ms = timestamp_ms

    def snapshot(self, states: Iterable[PartitionRanges]) -> dict[str, float | int | None]:
        states = list(states)
        now = self.clock()
        elapsed = now - self._catchup_since if self._catchup_since is not None else 0.0
        return {
            "open_ranges": sum(len(s.ranges) for s in states),
            "records_left_in_gaps": sum(s.records_left() for s in states),
            "delivered_primary": self.delivered_primary,
            "delivered_catchup": self.delivered_catchup,
            "catchup_rate_per_s": self.delivered_catchup / elapsed if elapsed > 0 else 0.0,
            "freshness_s": (now - self.newest_timestamp_ms / 1000.0)
            if self.newest_timestamp_ms is not None else None,
        }


def progress_line(snap: dict[str, float | int | None]) -> str:
    """One human line, e.g. for a log every few seconds."""
    fresh = snap["freshness_s"]
    return (
        f"catch-up: {snap['open_ranges']} open range(s), {snap['records_left_in_gaps']} record(s) left"
        f" in gaps, {snap['catchup_rate_per_s']:.0f} rec/s catching up,"
        f" delivered {snap['delivered_primary']} fresh + {snap['delivered_catchup']} gap,"
        f" freshness {'n/a' if fresh is None else f'{fresh:.2f}s'}"
    )
