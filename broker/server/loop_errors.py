"""The event loop's exception handler, rate-limited: a condition that repeats (accept() failing
with EMFILE while descriptors are short, say) is logged once per interval with a count of the
repeats, instead of one traceback per attempt flooding the log."""

from __future__ import annotations

import asyncio
import logging
import time

log = logging.getLogger(__name__)

INTERVAL_S = 60.0


class RateLimitedExceptionHandler:
    def __init__(self, interval_s: float = INTERVAL_S) -> None:
        self.interval_s = interval_s
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict) -> None:
        exc = context.get("exception")
        key = f"{context.get('message', '')}|{type(exc).__name__}|{getattr(exc, 'errno', '')}"
        now = time.monotonic()
        if now - self._last.get(key, -1e18) < self.interval_s:
            self._suppressed[key] = self._suppressed.get(key, 0) + 1
            return
        self._last[key] = now
        repeats = self._suppressed.pop(key, 0)
        if repeats:
            context = dict(context, message=f"{context.get('message', '')} "
                                            f"(and {repeats} more times in the last {self.interval_s:.0f} s)")
        loop.default_exception_handler(context)
