"""A bytes-per-second limit shared by the log cleaner's workers (`log.cleaner.io.max.bytes.per.second`),
as Kafka's Throttler: the bytes read and written are counted, and once per check interval a worker
that finds the rate since the last check above the limit sleeps until the average is back at it.
The rate may change at any time; 0 pauses the I/O until it changes (Kafka would sleep for ever),
a negative rate does not limit (as in Kafka). Thread-safe: the workers call it from their threads."""

from __future__ import annotations

import threading
import time
from typing import Callable

CHECK_INTERVAL_S = 0.3  # Kafka's cleaner throttler checks every 300 ms
PAUSE_POLL_S = 0.5


class Throttler:
    def __init__(self, rate: float, stop: threading.Event | None = None,
                 clock: Callable[[], float] = time.monotonic, check_interval_s: float = CHECK_INTERVAL_S) -> None:
        self.rate = rate
        self.stop = stop or threading.Event()
        self.clock = clock
        self.check_interval_s = check_interval_s
        self._lock = threading.Lock()
        self._period_start = clock()
        self._observed = 0.0
        self.throttled_seconds = 0.0  # total sleep, for /metrics and tests

    def set_rate(self, rate: float) -> None:
        self.rate = rate

    def _sleep(self, seconds: float) -> None:
        self.throttled_seconds += seconds
        self.stop.wait(seconds)

    def maybe_throttle(self, observed: int) -> None:
        """Count `observed` bytes; sleep (in the calling thread) if the rate is above the limit."""
        with self._lock:
            while self.rate == 0 and not self.stop.is_set():
                self._sleep(PAUSE_POLL_S)
            self._observed += observed
            now = self.clock()
            elapsed = now - self._period_start
            if elapsed <= self.check_interval_s or self._observed <= 0:
                return
            rate = self.rate
            if rate > 0 and self._observed / elapsed > rate:
                pause = self._observed / rate - elapsed
                if pause > 0:
                    self._sleep(pause)
            self._period_start = self.clock()
            self._observed = 0.0
