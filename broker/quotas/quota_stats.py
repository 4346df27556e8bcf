"""The rate arithmetic of KIP-13 quotas, as Kafka's metrics library does it.

Kafka measures a client's rate with a `Rate` over a `SampledStat` of `quota.window.num` samples,
each `quota.window.size.seconds` long: a sample starts at the first value recorded after the
previous one completed (samples are not aligned to clock boundaries), samples whose last value
is older than num * size are reset before measuring, and the rate is the sum of the samples divided by the
time since the oldest one started -- but never by less than (num - 1) full windows, so a new
client is not judged on its first burst alone. A value over the bound makes the throttle time
(observed - bound) / bound * window (QuotaUtils.throttleTime): the time the client must stay
quiet for its rate over the window to come back to the bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class RateConfig:
    """Kafka's MetricConfig for quota sensors: samples() and timeWindowMs()."""

    samples: int = 11
    window_ms: int = 1000


class _Sample:
    """Kafka's SampledStat.Sample (4.x): a window starts at its first event, and is obsolete once
    its last event is older than the whole window set."""

    __slots__ = ("value", "event_count", "start_ms", "last_event_ms")

    def __init__(self, now_ms: int) -> None:
        self.reset(now_ms)

    def reset(self, now_ms: int) -> None:
        self.value = 0.0
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def is_complete(self, now_ms: int, config: RateConfig) -> bool:
        return now_ms - self.start_ms >= config.window_ms


class Rate:
    """A windowed sum divided by the elapsed window, in units per second (Kafka's Rate(WindowedSum))."""

    __slots__ = ("config", "_samples", "_current")

    def __init__(self, config: RateConfig) -> None:
        self.config = config
        self._samples: list[_Sample] = []
        self._current = 0

    # -- SampledStat --------------------------------------------------------------------------

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % self.config.samples
        if self._current >= len(self._samples):
            sample = _Sample(now_ms)
            self._samples.append(sample)
        else:
            sample = self._samples[self._current]
            sample.reset(now_ms)
        return sample

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if sample.is_complete(now_ms, self.config):
            sample = self._advance(now_ms)
        sample.value += value
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def purge_obsolete(self, now_ms: int) -> None:
        expire_age = self.config.samples * self.config.window_ms
        for s in self._samples:
            if now_ms - s.last_event_ms >= expire_age:
                s.reset(now_ms)

    def _oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    # -- Rate ---------------------------------------------------------------------------------

    def window_size_ms(self, now_ms: int) -> int:
        """Elapsed time the sum is divided by: since the oldest sample, at least samples-1 windows, at least 1 ms."""
        self.purge_obsolete(now_ms)
        elapsed = now_ms - self._oldest(now_ms).start_ms
        full_windows = elapsed // self.config.window_ms
        min_full_windows = self.config.samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * self.config.window_ms
        return max(elapsed, 1)

    def total(self, now_ms: int) -> float:
        self.purge_obsolete(now_ms)
        return sum(s.value for s in self._samples)

    def measure(self, now_ms: int) -> float:
        """Units per second over the window (Rate.measure with TimeUnit.SECONDS)."""
        value = self.total(now_ms)
        return value / (self.window_size_ms(now_ms) / 1000.0)


class SimpleRate(Rate):
    """Kafka's SimpleRate, which its replication throttles (KIP-73's ReplicationQuotaManager) measure
    with: the sum is divided by the time since the oldest sample started, but never by less than one
    window. Unlike a client quota's Rate there is no padding to samples-1 windows, so a reassignment
    that starts copying is held to the throttle after its first window, not after ten windows' worth
    of bytes at full speed."""

    __slots__ = ()

    def window_size_ms(self, now_ms: int) -> int:
        self.purge_obsolete(now_ms)
        return max(now_ms - self._oldest(now_ms).start_ms, self.config.window_ms)


def java_round(x: float) -> int:
    """Math.round: halves go up (Python's round() goes to the even neighbour)."""
    return math.floor(x + 0.5)


def throttle_time_ms(observed: float, bound: float, window_ms: int) -> int:
    """QuotaUtils.throttleTime: how long to stay quiet so that the rate over the window meets the bound."""
    if bound <= 0:
        raise ValueError(f"a quota bound must be positive, not {bound}")
    return java_round((observed - bound) / bound * window_ms)


def bounded_throttle_time_ms(observed: float, bound: float, window_ms: int, max_ms: int) -> int:
    """QuotaUtils.boundedThrottleTime: the request quota never throttles longer than one quota window."""
    return max(0, min(throttle_time_ms(observed, bound, window_ms), max_ms))
