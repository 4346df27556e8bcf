"""KIP-73 replication throttles (quotas/replication_quota.py): which partitions a topic config
throttles on which broker, the rate against the bound, and Kafka's rule that a replica in the ISR
is never held back."""

import pytest

from broker import topic_config
from broker.metadata.broker_configs import FOLLOWER_RATE, LEADER_RATE, InvalidBrokerConfig, effective, validate
from broker.metadata.store import MetadataImage, new_topic
from broker.apis.handlers.describe_configs import (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG,
                                                     dynamic_entries)
from broker.quotas.replication_quota import ReplicationQuota, ReplicationQuotas, parse_replicas, throttled_partitions

LEADER_KEY = "leader.replication.throttled.replicas"
FOLLOWER_KEY = "follower.replication.throttled.replicas"


def image(**topics):
    return MetadataImage.build("c", {}, None, {name: new_topic(name, n, configs=c) for name, (n, c) in topics.items()})


def test_throttled_replicas_lists_parse_and_refuse_what_kafka_refuses():
    assert parse_replicas(" * ") == "*"
    assert parse_replicas("0:1, 1:2,") == [(0, 1), (1, 2)]
    assert parse_replicas("") == []
    for bad in ("0", "a:1", "0:b", "0:-1"):
        with pytest.raises(ValueError):
            parse_replicas(bad)
    assert topic_config.validate({LEADER_KEY: "0:1 ,1:2"}) == {LEADER_KEY: "0:1,1:2"}
    with pytest.raises(topic_config.TopicConfigError):
        topic_config.validate({FOLLOWER_KEY: "0-1"})


def test_a_partition_is_throttled_on_the_brokers_its_topic_lists_or_everywhere_with_a_star():
    img = image(a=(3, {LEADER_KEY: "0:1,2:1,1:2"}), b=(2, {LEADER_KEY: "*"}), c=(2, {FOLLOWER_KEY: "0:1"}))
    assert throttled_partitions(img, LEADER_KEY, 1) == {("a", 0), ("a", 2), ("b", 0), ("b", 1)}
    assert throttled_partitions(img, LEADER_KEY, 2) == {("a", 1), ("b", 0), ("b", 1)}
    assert throttled_partitions(img, FOLLOWER_KEY, 1) == {("c", 0)}
    q = ReplicationQuotas(1)
    q.update_topics(img)
    assert q.leader.is_throttled(("a", 0)) and not q.leader.is_throttled(("a", 1))
    assert q.follower.partitions == {("c", 0)}


def test_a_broker_value_wins_over_the_cluster_default_and_unset_is_unlimited():
    configs = {"": {LEADER_RATE: "100", FOLLOWER_RATE: "200"}, "1": {LEADER_RATE: "10"}}
    assert effective(configs, 1, LEADER_RATE) == ("10", False)
    assert effective(configs, 1, FOLLOWER_RATE) == ("200", True)
    assert effective({}, 1, LEADER_RATE) is None
    q = ReplicationQuotas(1)
    q.update_rates(configs)
    assert (q.leader.bound, q.follower.bound) == (10.0, 200.0)
    q.update_rates({})
    assert q.leader.bound is None and not q.leader.is_exceeded()
    with pytest.raises(InvalidBrokerConfig):
        validate("num.io.threads", "8")
    with pytest.raises(InvalidBrokerConfig):
        validate(LEADER_RATE, "-1")


def test_a_move_that_starts_at_full_speed_is_held_to_the_bound_after_its_first_window():
    """Kafka's replication quota is a SimpleRate: no padding to samples-1 windows as for client
    quotas, which let a new move copy ~10 windows' worth of bytes at full speed (the burst the
    drain bench saw: 109 MiB/s under a 50 MiB/s throttle)."""
    q = ReplicationQuota("follower")
    q.bound = 50.0 * 2**20
    start = 1_000_000
    for ms in range(0, 600, 100):  # 20 MiB every 100 ms: 120 MiB in the first 0.6 s
        q.record(20 * 2**20, start + ms)
    assert q.is_exceeded(start + 600)  # 120 MiB over one window, not over ten (12 MiB/s)
    assert q.rate.measure(start + 600) == pytest.approx(120 * 2**20)
    # Quiet until the measured rate is back under the bound: the bytes spread over 2.4 s.
    assert not q.is_exceeded(start + 2_500)
    assert q.is_exceeded(start + 2_300)


def test_only_a_replica_out_of_the_isr_is_held_back_once_the_rate_is_over_the_bound():
    q = ReplicationQuota("leader")
    q.bound = 1000.0
    q.partitions = frozenset({("t", 0)})
    now = 1_000_000
    q.record(500, now)  # 500 B over SimpleRate's minimum of one 1 s window: 500 B/s, under the bound
    assert not q.is_exceeded(now)
    q.record(2_000, now)  # 2500 B/s
    assert q.is_exceeded(now)
    assert q.throttled_bytes == 2_500
    # The rule reads the clock; pin the measurement to test the decision alone.
    q.is_exceeded = lambda now_ms=None: True
    assert q.should_throttle(("t", 0), in_sync=False)
    assert not q.should_throttle(("t", 0), in_sync=True)
    assert not q.should_throttle(("t", 1), in_sync=False)
    assert q.held_back == 1
    q.is_exceeded = lambda now_ms=None: False
    assert not q.should_throttle(("t", 0), in_sync=False)


def test_describe_reports_the_broker_value_over_the_default_and_the_default_resource_alone():
    configs = {"": {LEADER_RATE: "100"}, "1": {FOLLOWER_RATE: "5"}}
    by_name = {e.name: e for e in dynamic_entries(configs, "1")}
    assert (by_name[LEADER_RATE].value, by_name[LEADER_RATE].source) == ("100", DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert (by_name[FOLLOWER_RATE].value, by_name[FOLLOWER_RATE].source) == ("5", DYNAMIC_BROKER_CONFIG)
    unset = {e.name: e for e in dynamic_entries({}, "2")}
    assert unset[LEADER_RATE].value == str(2**63 - 1)
    assert [e.name for e in dynamic_entries(configs, "")] == [LEADER_RATE]


def test_an_idle_in_sync_followers_fetches_count_against_a_tiny_leader_rate():
    """As Kafka's KafkaApis: every follower fetch records its response's size restricted to the
    throttled partitions, framing included; under `--throttle 1` that alone exceeds the bound, so
    a new replica gets nothing from its first fetch on (as on Kafka), not one fetch's worth."""
    from types import SimpleNamespace

    from broker.protocol.fetch_response import PartitionResult
    from broker.apis.fetch_session import CachedPartition
    from broker.apis.handlers.fetch import FetchHandler

    q = ReplicationQuotas(1)
    handler = SimpleNamespace(broker=SimpleNamespace(replication_quotas=q), topics=FetchHandler.topics)
    idle = [(CachedPartition("t", None, 0, 5, 1 << 20), PartitionResult(0, 0, 5, 5, 0, None, -1, b""))]
    FetchHandler.record_throttled(handler, 17, idle)
    assert q.leader.throttled_bytes == 0  # no throttle set: nothing measured
    q.update_topics(image(t=(1, {LEADER_KEY: "0:1,0:2"})))
    q.update_rates({"": {LEADER_RATE: "1"}})
    FetchHandler.record_throttled(handler, 17, idle)
    assert q.leader.throttled_bytes > 0 and q.leader.is_exceeded()
    assert q.leader.should_throttle(("t", 0), in_sync=False) and not q.leader.should_throttle(("t", 0), in_sync=True)
