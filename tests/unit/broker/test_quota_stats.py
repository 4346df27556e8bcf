"""Kafka's quota arithmetic, window by window (Rate over SampledStat, QuotaUtils.throttleTime).

Expected values are worked out by hand from Kafka 4.1's formulas (org.apache.kafka.common.metrics
.stats.Rate.windowSize, SampledStat.record/purgeObsoleteSamples, QuotaUtils.throttleTime)."""

import pytest

from broker.quotas.quota_stats import (Rate, RateConfig, bounded_throttle_time_ms, java_round,
                                       throttle_time_ms)

CFG = RateConfig(samples=11, window_ms=1000)  # quota.window.num=11, quota.window.size.seconds=1


def test_a_new_client_is_judged_over_at_least_samples_minus_one_windows():
    r = Rate(CFG)
    r.record(5000, 0)
    # elapsed 0 ms, 0 full windows < 10: the window is stretched to 10 * 1000 ms
    assert r.window_size_ms(0) == 10_000
    assert r.measure(0) == 500.0
    r.record(10_000, 0)
    assert r.measure(0) == 1500.0
    # (1500 - 1000) / 1000 * 10000 ms
    assert throttle_time_ms(r.measure(0), 1000, r.window_size_ms(0)) == 5000


def test_one_sample_per_window_then_the_oldest_is_reused():
    r = Rate(CFG)
    for second in range(11):
        r.record(1000, second * 1000)
    assert r.window_size_ms(10_000) == 10_000          # 10 full windows since the oldest sample began
    assert r.measure(10_000) == pytest.approx(1100.0)  # 11 samples of 1000 bytes over 10 s
    assert r.window_size_ms(10_500) == 10_500          # elapsed time counts once past samples-1 windows
    assert r.measure(10_500) == pytest.approx(11_000 / 10.5)
    r.record(1000, 11_000)                             # wraps onto the sample of t=0 and resets it
    assert r.total(11_000) == 11_000
    assert r.window_size_ms(11_000) == 10_000          # oldest sample now starts at 1000
    assert r.measure(11_000) == pytest.approx(1100.0)


def test_a_sample_starts_at_its_first_event_not_on_a_clock_boundary():
    r = Rate(CFG)
    r.record(100, 250)
    r.record(100, 1249)   # same sample: 1249 - 250 < 1000
    r.record(100, 1250)   # complete: a new sample starting at 1250
    r.record(100, 2000)   # still the sample of 1250
    assert r.total(2000) == 400
    # oldest starts at 250: elapsed 1750 ms, 1 full window -> + 9 windows
    assert r.window_size_ms(2000) == 10_750


def test_samples_idle_for_the_whole_window_set_are_purged():
    r = Rate(CFG)
    r.record(1_000_000, 0)
    assert r.total(10_999) == 1_000_000   # last event 10999 ms ago: kept
    assert r.total(11_000) == 0           # 11 * 1000 ms: reset
    assert r.measure(11_000) == 0.0


def test_window_is_at_least_one_ms_and_rounding_is_javas():
    r = Rate(RateConfig(samples=1, window_ms=1000))
    r.record(10, 5)
    assert r.window_size_ms(5) == 1
    assert java_round(2.5) == 3 and java_round(3.5) == 4 and java_round(-2.5) == -2
    assert throttle_time_ms(1000.25, 1000, 10_000) == 3   # 2.5 ms rounds up, as Math.round
    with pytest.raises(ValueError):
        throttle_time_ms(5, 0, 1000)


def test_request_quota_throttle_is_bounded_by_one_window():
    assert bounded_throttle_time_ms(300, 100, 10_000, 1000) == 1000
    assert bounded_throttle_time_ms(101, 100, 10_000, 1000) == 100
    assert bounded_throttle_time_ms(50, 100, 10_000, 1000) == 0


def test_steady_producer_at_twice_its_quota_window_by_window():
    """A client sending 2000 B/s against a 1000 B/s bound, recorded every 100 ms: the throttle
    each window is what the formula gives for the measured rate at that moment."""
    r = Rate(CFG)
    for step in range(1, 151):
        now = step * 100
        r.record(200, now)
        observed = r.measure(now)
        window = r.window_size_ms(now)
        if now < 11_000:  # no sample reused yet: the oldest begins at the first record (100 ms)
            elapsed = now - 100
            assert window == elapsed + max(0, 10 - elapsed // 1000) * 1000
            assert observed == pytest.approx(200 * step / (window / 1000))
        expected = java_round((observed - 1000) / 1000 * window)
        assert throttle_time_ms(observed, 1000, window) == expected
    # at 15 s the samples begin at 4100, 5100, ..., 14100: 11 x 10 records of 200 bytes over 10.9 s
    assert r.window_size_ms(15_000) == 10_900
    assert r.measure(15_000) == pytest.approx(22_000 / 10.9)
