"""Start-up steps that need the metadata store, retried until it answers.

A broker started while the API server is unreachable (a control-plane upgrade, a network
partition, an etcd restart) must not exit: on Kubernetes an exit is a CrashLoopBackOff that
keeps the broker away for minutes after the API answers again. Each step is retried with an
exponential back-off and one log line per failed attempt; the caller (start-up) is cancelled
by SIGTERM, which ends the wait at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from broker.metadata.store import StoreUnavailable

log = logging.getLogger(__name__)

T = TypeVar("T")

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0


def next_delay(delay: float, max_delay_s: float = MAX_DELAY_S) -> float:
    """The back-off after a failed attempt that waited `delay`: doubled, up to `max_delay_s`."""
    return min(delay * 2, max_delay_s)


async def until_available(what: str, attempt: Callable[[], Awaitable[T]], *,
                          after_failure: Callable[[], Awaitable[None]] | None = None,
                          on_wait: Callable[[str], None] | None = None,
                          first_delay_s: float = FIRST_DELAY_S, max_delay_s: float = MAX_DELAY_S) -> T:
    """Run `attempt` until it does not raise StoreUnavailable; other errors propagate.
    `after_failure` undoes what a failed attempt left half-done (an open API client);
    `on_wait` is told why the broker waits (for /readyz)."""
    delay = first_delay_s
    n = 0
    while True:
        n += 1
        try:
            return await attempt()
        except StoreUnavailable as e:
            why = f"{what}: metadata store unavailable (attempt {n}, next in {delay:.1f}s): {e}"
            log.warning("%s", why)
            if on_wait is not None:
                on_wait(why)
            if after_failure is not None:
                await after_failure()
        await asyncio.sleep(delay)
        delay = next_delay(delay, max_delay_s)
