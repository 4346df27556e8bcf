"""How late the event loop runs what is ready: one broker process serves every request on one
loop, so a request whose answer is ready waits while other work holds the loop. A timer asked for
every 100 ms and observed as it fires measures that wait for everyone (Kafka's nearest measure is
its handler threads' idle ratio)."""

from __future__ import annotations

import asyncio

INTERVAL_S = 0.1


async def watch_loop_lag(histogram, interval_s: float = INTERVAL_S) -> None:
    """Observes, forever, how much later than asked each `interval_s` timer fired."""
    loop = asyncio.get_running_loop()
    while True:
        due = loop.time() + interval_s
        await asyncio.sleep(interval_s)
        histogram.observe(max(0.0, loop.time() - due))
