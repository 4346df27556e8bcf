"""Judging Leases alive by this process's own clock, as Kubernetes' leader election does.

A Lease's renewTime is written by another machine's clock, so it is not compared with ours.
Instead we note *when we saw* each renewal (a new renewTime or holder) and call the Lease live
until its leaseDurationSeconds have passed since then. A Lease seen for the first time counts as
just renewed, unless its renewTime is so old (more than twice its duration) that no plausible
skew explains it. After an outage of the API server nothing could be renewed or seen, so
`restart` judges every Lease afresh from the moment the view is current again.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from datetime import datetime, timezone


@dataclass
class _Seen:
    holder: str
    renew_time: str
    duration_s: float
    seen_at: float


class LeaseClock:
    def __init__(self, monotonic=time.monotonic) -> None:
        self._now = monotonic
        self._seen: dict[str, _Seen] = {}

    def observe(self, name: str, holder: str, renew_time: str, duration_s: float,
                renewed_wall: datetime | None = None) -> None:
        """Record the Lease as read now; a changed holder or renewTime counts as a renewal."""
        prev = self._seen.get(name)
        if prev is not None and prev.holder == holder and prev.renew_time == renew_time:
            prev.duration_s = duration_s
            return
        seen_at = self._now()
        if prev is None and renewed_wall is not None:
            age = (datetime.now(timezone.utc) - renewed_wall).total_seconds()
            if age > 2 * duration_s:
                seen_at = -math.inf
        self._seen[name] = _Seen(holder, renew_time, duration_s, seen_at)

    def forget(self, name: str) -> None:
        self._seen.pop(name, None)

    def live(self, name: str) -> bool:
        s = self._seen.get(name)
        return bool(s and s.holder) and self._now() < s.seen_at + s.duration_s

    def holder(self, name: str) -> str | None:
        s = self._seen.get(name)
        return s.holder if s else None

    def seen_ago(self, name: str) -> float | None:
        """Seconds since we last saw the Lease renewed (None: never seen, or seen too old to count)."""
        s = self._seen.get(name)
        if s is None or s.seen_at == -math.inf:
            return None
        return max(self._now() - s.seen_at, 0.0)

    def restart(self, since: float) -> None:
        """The view was stale from `since` (monotonic) until now, so renewals may have been missed:
        every Lease live at `since` is judged afresh from now on."""
        now = self._now()
        for s in self._seen.values():
            if s.seen_at + s.duration_s > since:
                s.seen_at = now
