"""One asyncio task per resource, started and stopped from watch events, holding no finalizer.

kopf's daemons put a finalizer on every resource they serve, so that a deletion waits for the
daemon to stop; while the operator is gone that finalizer holds the resource and any deletion of
its namespace. A schedule here is stopped when the DELETED event arrives instead: the resource is
gone at once, and a deletion the operator missed leaves nothing behind (the task died with it).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

log = logging.getLogger("flotilla_operator")

Key = tuple[str, str]  # (namespace, name)


@dataclass
class Schedule:
    """What a running task sees: the latest body from the watch (a live view, as kopf's daemons
    get) and a flag set when the resource is deleted or the operator stops."""

    body: dict[str, Any]
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    task: asyncio.Task[None] | None = None


class Schedules:
    """The running tasks of one kind, by (namespace, name)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._by_key: dict[Key, Schedule] = {}

    def keys(self) -> list[Key]:
        return list(self._by_key)

    def seen(self, key: Key, body: dict[str, Any], run: Callable[[Schedule], Awaitable[None]]) -> Schedule:
        """A watch event for a live resource: hand the task the new body, or start one (also when
        the previous task ended with an error, so a crash is not the end of a schedule)."""
        current = self._by_key.get(key)
        if current is not None and current.task is not None and not current.task.done():
            current.body = body
            return current
        schedule = Schedule(body=body)
        schedule.task = asyncio.create_task(self._guarded(key, run, schedule), name=f"{self.kind}/{key[0]}/{key[1]}")
        self._by_key[key] = schedule
        return schedule

    async def _guarded(self, key: Key, run: Callable[[Schedule], Awaitable[None]], schedule: Schedule) -> None:
        try:
            await run(schedule)
        except asyncio.CancelledError:
            raise
        except Exception:  # the next event starts a new task
            log.exception("%s %s/%s: its schedule stopped", self.kind, *key)

    def gone(self, key: Key) -> Schedule | None:
        """The resource was deleted: ask its task to stop after its current run."""
        schedule = self._by_key.pop(key, None)
        if schedule is not None:
            schedule.stopped.set()
        return schedule

    async def close(self, timeout: float) -> None:
        """The operator stops: every task is asked to stop, and cancelled after `timeout`."""
        schedules, self._by_key = list(self._by_key.values()), {}
        for s in schedules:
            s.stopped.set()
        tasks = [s.task for s in schedules if s.task is not None]
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=timeout)
        for t in pending:
            t.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
