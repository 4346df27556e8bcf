"""The broker metrics the shipped alerts and dashboards need (monitoring/, docs/operations.md):
fetch-session evictions by reason, log directory disk space, partitions under min.insync.replicas
and the controller/membership gauges, each read through the broker's registry as a scrape would."""

from __future__ import annotations

import types

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker.controller.metrics import ControllerCollector
from broker.metadata.store import BrokerRegistration, MetadataImage, PartitionState
from broker.apis.fetch_session import EVICTION_REASONS, FetchSessionCache
from broker.server.metrics import BrokerMetrics, disk_space
from broker.replica.replication_metrics import ReplicationCollector
from tests.unit.broker.test_fetch_session import Clock, open_session
from tests.unit.broker.test_replica_roles import ImageStore, manager, topic


def samples(registry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def evictions(metrics: BrokerMetrics) -> dict[str, float]:
    got = samples(metrics.registry)
    return {reason: got[("flotilla_incremental_fetch_session_evictions_total", (("reason", reason),))]
            for reason in EVICTION_REASONS}


def test_evictions_are_counted_by_the_rule_that_made_them():
    metrics, clock = BrokerMetrics(), Clock()
    cache = FetchSessionCache(2, 120_000, clock=clock)
    metrics.watch_fetch_sessions(cache)
    # Every reason is exported from the start, so rate() over it works before the first eviction.
    assert evictions(metrics) == {"idle": 0, "follower": 0, "larger": 0}
    open_session(cache, 5)
    open_session(cache, 2)
    assert open_session(cache, 1, privileged=True) != 0  # rule 1: a follower takes a consumer's slot
    assert evictions(metrics) == {"idle": 0, "follower": 1, "larger": 0}
    clock.ms += 120_001
    assert open_session(cache, 1) != 0  # rule 2: the least recently used one sat idle too long
    assert evictions(metrics) == {"idle": 1, "follower": 1, "larger": 0}
    assert samples(metrics.registry)[("flotilla_fetch_session_cache_slots_used", ())] == 2


def test_rule3_counts_as_larger():
    metrics, clock = BrokerMetrics(), Clock()
    cache = FetchSessionCache(1, 120_000, clock=clock)
    metrics.watch_fetch_sessions(cache)
    small = open_session(cache, 1)
    clock.ms += 120_001
    cache.touch(cache.get(small))  # in use (not idle), but older than the eviction time
    assert open_session(cache, 3) != 0
    assert evictions(metrics) == {"idle": 0, "follower": 0, "larger": 1}


def test_disk_space_of_a_log_dir_and_none_for_a_missing_one(tmp_path):
    total, usable = disk_space(tmp_path)
    assert total > 0 and 0 <= usable <= total
    assert disk_space(tmp_path / "gone") is None


def test_log_dirs_export_total_and_usable_bytes_and_skip_unreadable_ones(tmp_path):
    good, gone = tmp_path / "good", tmp_path / "gone"
    good.mkdir()
    cleaner = types.SimpleNamespace(cleanings=0, bytes_read=0, bytes_written=0, last_clean_seconds=0.0, workers=[],
                                    throttler=types.SimpleNamespace(throttled_seconds=0.0))
    rm = types.SimpleNamespace(log_dirs=[good, gone], offline_dirs={gone: "disk failed"}, partitions={}, cleaner=cleaner)
    metrics = BrokerMetrics()
    metrics.watch_logs(rm)
    got = samples(metrics.registry)
    assert got[("flotilla_log_dir_total_bytes", (("dir", str(good)),))] > 0
    assert ("flotilla_log_dir_usable_bytes", (("dir", str(good)),)) in got
    assert ("flotilla_log_dir_total_bytes", (("dir", str(gone)),)) not in got
    assert got[("flotilla_log_dir_offline", (("dir", str(gone)),))] == 1


def replication(tmp_path, state: PartitionState, min_isr: str) -> dict:
    store = ImageStore(topic(state, **{"min.insync.replicas": min_isr}))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    metrics = BrokerMetrics()
    metrics.registry.register(ReplicationCollector(
        rm, types.SimpleNamespace(active=False), types.SimpleNamespace(fetchers={})))
    return samples(metrics.registry)


async def test_a_partition_led_here_with_an_isr_below_min_isr_is_counted(tmp_path):
    got = replication(tmp_path / "a", PartitionState(1, 0, (1, 2, 3), (1,)), min_isr="2")
    assert got[("flotilla_under_min_isr_partitions", ())] == 1
    assert got[("flotilla_under_replicated_partitions", ())] == 1


async def test_an_isr_at_min_isr_is_under_replicated_but_not_under_min_isr(tmp_path):
    got = replication(tmp_path / "b", PartitionState(1, 0, (1, 2, 3), (1, 2)), min_isr="2")
    assert got[("flotilla_under_min_isr_partitions", ())] == 0
    assert got[("flotilla_under_replicated_partitions", ())] == 1


async def test_min_isr_above_the_replica_count_is_capped_as_produce_does(tmp_path):
    # min.insync.replicas=5 on three replicas, all in sync: acks=all works, so not under min ISR.
    got = replication(tmp_path / "c", PartitionState(1, 0, (1, 2, 3), (1, 2, 3)), min_isr="5")
    assert got[("flotilla_under_min_isr_partitions", ())] == 0


def test_controller_gauges_follow_the_image_and_the_lease():
    brokers = {n: BrokerRegistration(n, f"i{n}", ()) for n in (1, 2, 3)}
    store = types.SimpleNamespace(image=MetadataImage.build("c", brokers, 2, {}))
    controller = types.SimpleNamespace(store=store, active=True, writes=7)
    metrics = BrokerMetrics()
    metrics.registry.register(ControllerCollector(controller))
    got = samples(metrics.registry)
    assert got[("flotilla_controller_active", ())] == 1
    assert got[("flotilla_controller_id", ())] == 2
    assert got[("flotilla_registered_brokers", ())] == 3
    assert got[("flotilla_controller_assignment_writes_total", ())] == 7
    controller.active = False
    store.image = MetadataImage.build("c", {1: brokers[1]}, None, {})
    got = samples(metrics.registry)
    assert got[("flotilla_controller_active", ())] == 0
    assert got[("flotilla_controller_id", ())] == -1
    assert got[("flotilla_registered_brokers", ())] == 1
