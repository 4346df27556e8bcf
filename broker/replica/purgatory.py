"""One purgatory for every request that waits: long-poll fetches today; acks=all produce,
DeleteRecords waiting for followers and quota throttling plug into the same mechanism.

A delayed operation completes exactly once: when `try_complete()` finds its condition met
(checked at once, and again whenever something happens under one of its watch keys, such as
an append to a topic-partition) or when its timeout expires. The check is told which key fired,
so an operation watching many keys (a fetch of 10,000 partitions) can look at that one only.

The time a request spends here is its remote time (Kafka's RemoteTimeMs): from parking until the
event that completes it (or the timeout); the time from that event until the waiting task runs
again is event-loop delay, counted apart (`ParkedTime`, read by the dispatcher's request stages).
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable


@dataclass
class ParkedTime:
    """What one request spent in purgatories: waiting for its condition (`remote_ns`), and from
    the completing event until its task resumed (`resume_ns`, time the event loop was busy)."""

    remote_ns: int = 0
    resume_ns: int = 0
    # Called once when the request first parks (the connection then reads its next request).
    on_park: Callable[[], object] | None = None


#: The request being handled in this task, set by the dispatcher (None outside a request).
PARKED: ContextVar[ParkedTime | None] = ContextVar("flotilla_parked_time", default=None)


class DelayedOperation:
    def __init__(self) -> None:
        self._done = asyncio.get_running_loop().create_future()
        self.completed_ns = 0  # when its condition was met (perf_counter_ns), 0 until then

    def can_complete(self, key: Hashable | None = None) -> bool:
        """Whether the operation's condition holds now (overridden by each kind of operation).
        `key` is the watch key whose change prompted the check (None: first check, or expiry)."""
        raise NotImplementedError

    def try_complete(self, key: Hashable | None = None) -> bool:
        if self._done.done():
            return True
        if self.can_complete(key):
            self.completed_ns = time.perf_counter_ns()
            self._done.set_result(True)
            return True
        return False

    def force_complete(self) -> None:
        if not self._done.done():
            self.completed_ns = time.perf_counter_ns()
            self._done.set_result(True)

    @property
    def completed(self) -> bool:
        return self._done.done()


class Purgatory:
    def __init__(self, name: str) -> None:
        self.name = name
        self._watchers: dict[Hashable, set[DelayedOperation]] = defaultdict(set)

    async def wait(self, op: DelayedOperation, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Wait until `op` completes or times out. Returns True if its condition was met."""
        if op.try_complete():
            return True
        keys = list(keys)
        for k in keys:
            self._watchers[k].add(op)
        parked_ns = time.perf_counter_ns()
        _announce_park()
        try:
            await asyncio.wait_for(asyncio.shield(op._done), timeout_s)
            return True
        except asyncio.TimeoutError:
            return op.try_complete()
        finally:
            _account(parked_ns, op.completed_ns)
            for k in keys:
                ws = self._watchers.get(k)
                if ws is not None:
                    ws.discard(op)
                    if not ws:
                        del self._watchers[k]

    def check_and_complete(self, key: Hashable) -> int:
        """Something changed under `key`: complete every watcher whose condition now holds."""
        ops = self._watchers.get(key)
        if not ops:
            return 0
        return sum(1 for op in list(ops) if op.try_complete(key))

    def check_all(self) -> int:
        """Something changed for every key (the live brokers): complete whoever can now."""
        ops = {op for ws in self._watchers.values() for op in ws}
        return sum(1 for op in ops if op.try_complete())

    def watched(self) -> int:
        return sum(len(v) for v in self._watchers.values())

    def complete_all(self) -> None:
        """Shutting down: release every waiter now."""
        for ops in list(self._watchers.values()):
            for op in list(ops):
                op.force_complete()


def _account(parked_ns: int, completed_ns: int) -> None:
    """Adds one wait to the current request's ParkedTime: remote until the completing event (or
    now, for a timeout), resume from then until now."""
    spent = PARKED.get()
    if spent is None:
        return
    now = time.perf_counter_ns()
    done = completed_ns if parked_ns <= completed_ns <= now else now
    spent.remote_ns += done - parked_ns
    spent.resume_ns += now - done


def _announce_park() -> None:
    spent = PARKED.get()
    if spent is not None and spent.on_park is not None:
        on_park, spent.on_park = spent.on_park, None
        on_park()
