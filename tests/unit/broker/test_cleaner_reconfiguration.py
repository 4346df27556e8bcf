"""The log cleaner's dynamic keys: Kafka's types, bounds and reconfiguration rules, the precedence of
a broker's own value over the cluster default over its properties over Kafka's default (in force
and in DescribeConfigs), and a running cleaner taking new values: workers, map and buffer sizes,
I/O rate, backoff."""

from __future__ import annotations

import asyncio
import threading

import pytest
from kio.schema.errors import ErrorCode

from broker.log import cleaner_settings as cs
from broker.log.cleaner import LogCleaner
from broker.log.throttler import Throttler
from broker.metadata import broker_configs
from broker.metadata.broker_configs import FileBrokerConfigStore, InvalidBrokerConfig
from broker.admin.cleaner_reconfiguration import CleanerReconfiguration
from broker.admin.config_alteration import BROKER, DELETE, SET, alter, incremental
from broker.apis.handlers.describe_configs import (DEFAULT_CONFIG, DYNAMIC_BROKER_CONFIG,
                                                     DYNAMIC_DEFAULT_BROKER_CONFIG, DOUBLE, INT, LONG,
                                                     STATIC_BROKER_CONFIG, dynamic_entries)
from tests.unit.broker.test_cleaner import NOW, append, fill, open_log

MiB = 1024 * 1024


@pytest.mark.parametrize("name,value,sense", [
    (cs.THREADS, "two", "Not a number of type INT"),
    (cs.THREADS, "-1", "Value must be at least 0"),
    (cs.THREADS, str(2**31), "Not a number of type INT"),
    (cs.DEDUPE_BUFFER_SIZE, "1.5", "Not a number of type LONG"),
    (cs.IO_BUFFER_SIZE, "-5", "Value must be at least 0"),
    (cs.LOAD_FACTOR, "high", "Not a number of type DOUBLE"),
    (cs.IO_MAX_BYTES_PER_SECOND, "", "Not a number of type DOUBLE"),
    (cs.BACKOFF_MS, "-1", "Value must be at least 0"),
])
def test_values_kafka_configdef_refuses_are_refused_naming_the_key(name, value, sense):
    with pytest.raises(InvalidBrokerConfig) as e:
        broker_configs.validate(name, value)
    assert name in str(e.value) and sense in str(e.value)


def test_accepted_values_are_stored_as_given():
    assert broker_configs.validate(cs.LOAD_FACTOR, "0.75") == "0.75"
    assert broker_configs.validate(cs.IO_MAX_BYTES_PER_SECOND, "1e6") == "1e6"
    assert broker_configs.validate(cs.BACKOFF_MS, " 100") == " 100"  # Kafka trims numbers, keeps the text


def test_thread_count_moves_by_at_most_half_or_double_and_dedupe_buffer_covers_each_thread():
    now = cs.CleanerSettings(threads=4, dedupe_buffer_size=64 * MiB)
    cs.check_change(now, cs.replace(now, threads=2))
    cs.check_change(now, cs.replace(now, threads=8))
    for threads, sense in ((1, "less than half the current value 4"), (9, "more than double the current value 4"),
                           (0, "at least 1")):
        with pytest.raises(cs.InvalidCleanerValue, match=sense):
            cs.check_change(now, cs.replace(now, threads=threads))
    with pytest.raises(cs.InvalidCleanerValue, match="at least 1MB per cleaner thread"):
        cs.check_change(now, cs.replace(now, dedupe_buffer_size=4 * MiB))  # exactly 1 MiB each is too little


def test_precedence_own_then_cluster_default_then_properties_then_kafka_default():
    configs = {"": {cs.THREADS: "2", cs.BACKOFF_MS: "500"}, "1": {cs.BACKOFF_MS: "100"}}
    static = {cs.BACKOFF_MS: "900", cs.IO_BUFFER_SIZE: "65536", cs.THREADS: "1"}
    values = broker_configs.cleaner_values(configs, 1, static)
    assert values == {cs.BACKOFF_MS: "100", cs.THREADS: "2", cs.IO_BUFFER_SIZE: "65536"}
    assert broker_configs.cleaner_values(configs, 2, static)[cs.BACKOFF_MS] == "500"
    s = cs.from_values(broker_configs.cleaner_values({}, 1, {}))
    assert s == cs.CleanerSettings()  # Kafka's defaults: 1 thread, 128 MiB, 512 KiB, 0.9, no limit, 15 s
    assert s.io_max_bytes_per_second == float(cs.DOUBLE_MAX)


def test_describe_reports_each_level_as_a_synonym_in_kafka_order():
    configs = {"": {cs.THREADS: "2", cs.LOAD_FACTOR: "0.5"}, "1": {cs.THREADS: "3"}}
    static = {cs.THREADS: "1", cs.BACKOFF_MS: "900"}
    got = {e.name: e for e in dynamic_entries(configs, "1", static)}
    threads = got[cs.THREADS]
    assert (threads.value, threads.source, threads.type) == ("3", DYNAMIC_BROKER_CONFIG, INT)
    assert [(v, src) for _, v, src in threads.synonyms] == [
        ("3", DYNAMIC_BROKER_CONFIG), ("2", DYNAMIC_DEFAULT_BROKER_CONFIG), ("1", STATIC_BROKER_CONFIG),
        ("1", DEFAULT_CONFIG)]
    assert (got[cs.LOAD_FACTOR].value, got[cs.LOAD_FACTOR].source, got[cs.LOAD_FACTOR].type) == (
        "0.5", DYNAMIC_DEFAULT_BROKER_CONFIG, DOUBLE)
    assert (got[cs.BACKOFF_MS].value, got[cs.BACKOFF_MS].source, got[cs.BACKOFF_MS].type) == (
        "900", STATIC_BROKER_CONFIG, LONG)
    unset = got[cs.IO_MAX_BYTES_PER_SECOND]
    assert (unset.value, unset.source, unset.synonyms) == (cs.DOUBLE_MAX, DEFAULT_CONFIG,
                                                           ((cs.IO_MAX_BYTES_PER_SECOND, cs.DOUBLE_MAX, DEFAULT_CONFIG),))
    default_resource = {e.name: e for e in dynamic_entries(configs, "", static)}
    assert set(default_resource) == {cs.THREADS, cs.LOAD_FACTOR}  # only what the cluster default sets
    assert default_resource[cs.THREADS].synonyms == ((cs.THREADS, "2", DYNAMIC_DEFAULT_BROKER_CONFIG),)


def wired(tmp_path, static=None, broker_id=1):
    """A broker's store, cleaner and reconfiguration, wired as server/broker.py does."""
    store = FileBrokerConfigStore(tmp_path)
    static = static or {}
    cleaner = LogCleaner([tmp_path], lambda: {}, settings=cs.from_values(static))
    reconf = CleanerReconfiguration(broker_id, static, cleaner)
    store.check = reconf.check
    store.subscribe(reconf.apply)
    reconf.apply(store.configs)
    return store, cleaner


def inc(entries):
    return lambda: incremental(entries, lambda current: current)


async def test_alterations_the_running_cleaner_cannot_take_are_invalid_request(tmp_path):
    store, cleaner = wired(tmp_path, {cs.THREADS: "2"})
    cleaner._changed = asyncio.Event()  # as if run() had started: the step rule applies
    out = await alter(None, BROKER, "1", inc([(cs.THREADS, SET, "5")]), False, store)
    assert out.error_code == ErrorCode.invalid_request
    assert "more than double the current value 2" in out.error_message
    out = await alter(None, BROKER, "", inc([(cs.THREADS, SET, "5")]), True, store)  # validate_only too
    assert out.error_code == ErrorCode.invalid_request
    out = await alter(None, BROKER, "1", inc([(cs.DEDUPE_BUFFER_SIZE, SET, str(2 * MiB))]), False, store)
    assert out.error_code == ErrorCode.invalid_request and "1MB per cleaner thread" in out.error_message
    out = await alter(None, BROKER, "1", inc([(cs.IO_BUFFER_SIZE, SET, "-1")]), False, store)
    assert out.error_code == ErrorCode.invalid_request and cs.IO_BUFFER_SIZE in out.error_message
    assert dict(store.configs) == {}
    assert (await alter(None, BROKER, "1", inc([(cs.THREADS, SET, "4")]), False, store)).error_code == ErrorCode.none
    assert cleaner.settings.threads == 4
    assert (await alter(None, BROKER, "1", inc([(cs.THREADS, DELETE, None)]), False, store)
            ).error_code == ErrorCode.none
    assert cleaner.settings.threads == 2  # back to the properties' value
    out = await alter(None, BROKER, "1", lambda: incremental([(cs.THREADS, 2, "3")], lambda c: c), False, store)
    assert out.error_code == ErrorCode.invalid_config  # APPEND on a key that is not a list, as Kafka
    # another broker's entity is that broker's to judge
    assert (await alter(None, BROKER, "7", inc([(cs.THREADS, SET, "64")]), False, store)).error_code == ErrorCode.none


async def test_the_cluster_default_applies_under_a_brokers_own_value(tmp_path):
    store, cleaner = wired(tmp_path, {cs.BACKOFF_MS: "900"})
    await alter(None, BROKER, "", inc([(cs.BACKOFF_MS, SET, "500"), (cs.IO_MAX_BYTES_PER_SECOND, SET, "1000")]),
                False, store)
    assert (cleaner.settings.backoff_ms, cleaner.throttler.rate) == (500, 1000.0)
    await alter(None, BROKER, "1", inc([(cs.BACKOFF_MS, SET, "100")]), False, store)
    assert cleaner.settings.backoff_ms == 100
    await alter(None, BROKER, "1", inc([(cs.BACKOFF_MS, DELETE, None)]), False, store)
    await alter(None, BROKER, "", inc([(cs.BACKOFF_MS, DELETE, None)]), False, store)
    assert cleaner.settings.backoff_ms == 900


def test_stored_values_a_running_cleaner_cannot_take_are_logged_and_not_applied(tmp_path, caplog):
    cleaner = LogCleaner([tmp_path], lambda: {})
    cleaner._changed = asyncio.Event()
    reconf = CleanerReconfiguration(1, {}, cleaner)
    reconf.apply({"": {cs.THREADS: "8", cs.BACKOFF_MS: "5"}})  # set through a broker with 4 threads
    assert cleaner.settings == cs.CleanerSettings()
    assert "more than double" in caplog.text
    fresh = LogCleaner([tmp_path], lambda: {})  # at start-up, stored values are taken whole, as Kafka
    CleanerReconfiguration(1, {}, fresh).apply({"": {cs.THREADS: "8"}})
    assert fresh.settings.threads == 8


def test_sizes_of_the_next_cleaning_follow_the_settings(tmp_path):
    cleaner = LogCleaner([tmp_path], lambda: {})
    c = cleaner._new_cleaner()
    assert c.map_capacity == int(128 * MiB // cs.ENTRY_BYTES * 0.9) and c.read_chunk == 256 * 1024
    cleaner.reconfigure(cs.CleanerSettings(threads=2, dedupe_buffer_size=8 * MiB, load_factor=0.5,
                                           io_buffer_size=64 * 1024, io_max_bytes_per_second=5e5))
    c = cleaner._new_cleaner()
    assert c.map_capacity == int(4 * MiB // cs.ENTRY_BYTES * 0.5)
    assert c.read_chunk == c.write_buffer == 16 * 1024
    assert c.throttler is cleaner.throttler and cleaner.throttler.rate == 5e5


def cleaner_of_one_dirty_log(tmp_path, rounds: int):
    """A log with `rounds` of 4 keys rolled into closed segments (an active one after them), and a
    cleaner of it alone."""
    lg = open_log(tmp_path)
    fill(lg, rounds=rounds, keys=4)
    lg.roll()
    append(lg, [(b"x", b"active")])
    return lg, LogCleaner([tmp_path], lambda: {("t", 0): lg})


def test_a_small_map_leaves_the_rest_of_the_dirty_section_for_the_next_cleaning(tmp_path):
    lg, lc = cleaner_of_one_dirty_log(tmp_path, rounds=3)
    lc.reconfigure(cs.CleanerSettings(dedupe_buffer_size=2 * MiB, load_factor=2 * cs.ENTRY_BYTES / (2 * MiB)))
    assert lc._new_cleaner().map_capacity == 2
    first_dirty = lc.plan(("t", 0), lg, 0)[0].first_dirty
    lc.clean_filthiest(0)
    assert first_dirty < lc.first_dirty[("t", 0)] < lg.active.base_offset  # part of it, bounded by the map


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_throttler_sleeps_until_the_average_is_back_at_the_rate():
    clock = FakeClock()
    slept = []
    t = Throttler(1000.0, clock=clock)
    t._sleep = lambda s: (slept.append(s), setattr(clock, "now", clock.now + s))
    t.maybe_throttle(100)  # within the first check interval: nothing
    clock.now = 0.5
    t.maybe_throttle(900)  # 1000 bytes in 0.5 s: twice the rate, sleep 0.5 s
    assert slept == [pytest.approx(0.5)]
    clock.now += 1.0
    t.maybe_throttle(500)  # 500 bytes in 1 s: under the rate
    assert len(slept) == 1
    t.set_rate(-1)  # negative: no limit, as Kafka
    clock.now += 0.5
    t.maybe_throttle(10**9)
    assert len(slept) == 1


def test_throttler_at_zero_pauses_until_the_rate_changes():
    t = Throttler(0.0)
    done = threading.Event()
    th = threading.Thread(target=lambda: (t.maybe_throttle(10), done.set()))
    th.start()
    assert not done.wait(0.3)
    t.set_rate(1e9)
    assert done.wait(5), "the paused cleaner I/O did not resume once the rate changed"
    th.join(5)


async def test_workers_follow_the_thread_count_and_never_share_a_log(tmp_path):
    logs = {}
    for p in range(4):
        lg = open_log(tmp_path / f"d{p}")
        fill(lg)
        lg.roll()
        append(lg, [(b"x", b"active")])
        logs[("t", p)] = lg
    lc = LogCleaner([tmp_path], lambda: logs, backoff_ms=60_000)
    seen_together, cleaned = [], []
    original = lc.clean_async

    async def clean_async(job):
        cleaned.append(job.topic_partition)
        seen_together.append(set(lc.in_progress))
        await asyncio.sleep(0.05)  # hold the log so another worker must choose a different one
        return await original(job)
    lc.clean_async = clean_async
    lc.reconfigure(cs.replace(lc.settings, threads=2))
    task = asyncio.create_task(lc.run())
    try:
        for _ in range(200):
            if lc.cleanings == 4:
                break
            await asyncio.sleep(0.02)
        assert lc.cleanings == 4 and len(lc._workers) == 2
        assert any(len(s) == 2 for s in seen_together), "the two workers never cleaned at the same time"
        assert sorted(cleaned) == sorted(logs)  # each log once: no two workers took the same one
        lc.reconfigure(cs.replace(lc.settings, threads=1, backoff_ms=10))  # wakes the sleeping workers
        for _ in range(200):
            if len(lc._workers) == 1:
                break
            await asyncio.sleep(0.02)
        assert list(lc._workers) == [0]
        lc.reconfigure(cs.replace(lc.settings, threads=2))
        await asyncio.sleep(0.05)
        assert sorted(lc._workers) == [0, 1]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert lc._workers == {} or all(t.done() for t in lc._workers.values())


def test_a_cleaning_under_an_io_limit_sleeps_for_its_bytes(tmp_path):
    _, lc = cleaner_of_one_dirty_log(tmp_path, rounds=6)
    lc.throttler.check_interval_s = 0.0  # check at every read and write
    rate = 50_000.0
    lc.reconfigure(cs.replace(lc.settings, io_max_bytes_per_second=rate))
    stats = lc.clean_filthiest(NOW)
    assert stats is not None and stats.bytes_read > 0
    # every byte read (map, then rewrite) and written counts: at least the rewrite's share of it
    assert lc.throttler.throttled_seconds >= 0.9 * (stats.bytes_read + stats.bytes_written) / rate - 0.05
