"""The runner of the election: reads the Lease, lets lease.py decide, writes what it says. The
only I/O of the election; every choice is lease.py's.

`campaign` returns once this process holds the Lease (or when asked to stop); `keep` renews it
every retry period and returns when leadership is lost: another holder took it, or no renewal
succeeded within the renew deadline. `release` hands it back on a clean stop.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from datetime import datetime, timezone
from typing import Any, Callable

from ..clients.kube import ApiError
from . import lease as L

logger = logging.getLogger("flotilla.election")


class Elector:
    def __init__(self, kube: Any, namespace: str, name: str, identity: str, timing: L.Timing, *,
                 monotonic: Callable[[], float] = time.monotonic,
                 wall: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> None:
        self.kube, self.namespace, self.name, self.identity, self.timing = kube, namespace, name, identity, timing
        self._now, self._wall = monotonic, wall
        self.seen: L.Seen | None = None
        self.last_renewed: float | None = None  # monotonic time of our last successful write, leading
        self.last_read: float | None = None  # monotonic time of our last successful read of the Lease
        self.leading = False
        self.holder = ""  # who holds it, as last read

    async def try_once(self) -> bool:
        """One read, one decision, at most one write: True when we hold the Lease afterwards."""
        started = self._now()
        try:
            lease = await self.kube.get("Lease", self.namespace, self.name)
        except (ApiError, OSError, asyncio.TimeoutError) as exc:
            logger.warning(f"election: reading Lease {self.namespace}/{self.name} failed: {exc}")
            return False
        self.last_read = self._now()
        self.seen = L.observe(self.seen, lease, self.last_read)
        decision = L.decide(lease, self.seen, self.identity, self.timing, now=self.last_read, wall=self._wall(),
                            namespace=self.namespace, name=self.name)
        self.holder = decision.holder
        if decision.action == L.WAIT:
            return False
        try:
            written = await (self.kube.create(decision.body) if decision.create else self.kube.replace(decision.body))
        except ApiError as exc:  # 409: another candidate wrote first; anything else: try again later
            if exc.status != 409:
                logger.warning(f"election: writing Lease {self.namespace}/{self.name} failed: {exc}")
            return False
        except (OSError, asyncio.TimeoutError) as exc:
            logger.warning(f"election: writing Lease {self.namespace}/{self.name} failed: {exc}")
            return False
        if written is None:  # created by another candidate in between
            return False
        self.seen = L.observe(self.seen, written, started)
        self.last_renewed = started  # the Lease counts from before the write was sent, never later
        if decision.action == L.ACQUIRE:
            logger.info(f"election: {self.identity} acquired Lease {self.namespace}/{self.name} "
                        f"(transitions {written['spec'].get('leaseTransitions')})")
        return True

    async def campaign(self, stop: asyncio.Event) -> bool:
        """Try every retry period until this process holds the Lease (True) or `stop` is set."""
        logger.info(f"election: {self.identity} campaigning for Lease {self.namespace}/{self.name}")
        reported = None
        while not stop.is_set():
            if await self.try_once():
                self.leading = True
                return True
            if self.holder and self.holder != reported:
                logger.info(f"election: standing by; {self.holder} holds Lease {self.namespace}/{self.name}")
                reported = self.holder
            if await _wait(stop, self._jittered()):
                break
        return False

    async def keep(self) -> str:
        """Renew until leadership is lost; returns why."""
        while True:
            await asyncio.sleep(self.timing.retry_period_s)
            held = await self.try_once()
            if not held and self.holder and self.holder != self.identity:
                self.leading = False
                return f"{self.holder} holds the Lease now"
            if not L.still_leading(self.last_renewed, self._now(), self.timing):
                self.leading = False
                return f"no renewal succeeded within the renew deadline ({self.timing.renew_deadline_s:g}s)"

    async def release(self) -> bool:
        """Give the Lease up (a clean stop): the standby takes it at its next try."""
        self.leading = False
        try:
            lease = await self.kube.get("Lease", self.namespace, self.name)
            body = L.released(lease, self.identity, self._wall()) if lease else None
            if body is None:
                return False
            await self.kube.replace(body)
        except (ApiError, OSError, asyncio.TimeoutError) as exc:
            logger.warning(f"election: releasing Lease {self.namespace}/{self.name} failed: {exc}")
            return False
        logger.info(f"election: {self.identity} released Lease {self.namespace}/{self.name}")
        return True

    def _jittered(self) -> float:
        return self.timing.retry_period_s * (1 + 0.2 * random.random())


async def _wait(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep `seconds` or until `stop` is set; True when it was set."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
        return True
    except asyncio.TimeoutError:
        return False
