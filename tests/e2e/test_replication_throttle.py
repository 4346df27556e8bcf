"""KIP-73 replication throttles as `kafka-reassign-partitions.sh --execute --throttle` sets them, on
three brokers (Flotilla's fleet, or three KRaft Kafka 4.1 nodes with `--kafka-target=apache`):

- two single-replica topics hold about 2 MiB each; topic T gets a new replica under a 50 KB/s
  throttle, then topic U (`--additional`, no throttle) gets one too;
- while T moves, DescribeConfigs shows the throttle: both rates on the brokers of the move
  (DYNAMIC_BROKER_CONFIG) and T's `leader/follower.replication.throttled.replicas`;
- the relation that shows the throttle works, with no clock in it: U's unthrottled move, started
  after T's, is complete (its new replica in the ISR) while T's new replica is still out of the ISR;
- T's move completes, `--verify` reports clearing the throttles, and DescribeConfigs no longer shows
  it on the brokers or the topic;
- Flotilla: the brokers' /metrics counted throttled bytes and held reads back.

    pytest -m kube tests/e2e/test_replication_throttle.py
    pytest tests/e2e/test_replication_throttle.py --kafka-target=apache
"""

from __future__ import annotations

import re
import urllib.request

import pytest

from tests.e2e.test_reassignment import plan_file, reassign_tool
from tests.e2e.test_replication import create_topic, partition_states, producer
from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv.brokers.fleet import Fleet
from tests.support.fleet import fleet_cluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]

THROTTLE = 50_000  # bytes/s
RATES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
REPLICAS = ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")
OVERRIDES = {"offsets.topic.replication.factor": "1", "replica.fetch.backoff.ms": "200"}


@pytest.fixture
def cluster(kafka_target, tmp_path, request):
    kafka_tools.libs_or_skip()
    with fleet_cluster(kafka_target, tmp_path, request, overrides=OVERRIDES) as c:
        yield c


def fill(bootstrap: str, topic: str) -> None:
    """About 2 MiB into partition 0, acks=all."""
    p = producer(bootstrap)
    pad = b"x" * 65536
    for i in range(32):
        p.produce(topic, partition=0, value=b"fill-%06d-" % i + pad)
        p.poll(0)
    assert p.flush(120) == 0, f"the records for {topic} were not all acknowledged"


def describe(bootstrap: str, kind: str, name: str) -> dict[str, tuple[str | None, str]]:
    """DescribeConfigs of one resource through confluent-kafka: name -> (value, source name)."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC, name)
    entries = admin.describe_configs([resource], request_timeout=15)[resource].result(30)
    return {n: (e.value, ConfigSource(e.source).name) for n, e in entries.items()}


def dynamic(entries: dict[str, tuple[str | None, str]], keys) -> dict[str, str | None]:
    """The keys of `keys` that a dynamic config sets (not a default)."""
    return {k: entries[k][0] for k in keys if k in entries and entries[k][1].startswith("DYNAMIC")}


def pairs(value: str | None) -> set[str]:
    return {v.strip() for v in (value or "").split(",") if v.strip()}


def metric(broker, name: str, side: str) -> float:
    with urllib.request.urlopen(broker.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    m = re.search(rf'^{name}{{side="{side}"}} ([0-9.e+]+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def single_replica_topic(cluster: Fleet) -> tuple[str, int, int]:
    """A one-partition RF=1 topic with about 2 MiB: (name, its broker, another broker)."""
    topic = create_topic(cluster.brokers[0], 1, rf=1, prefix="thr")
    cluster.wait_leaders(topic, 1)
    source = partition_states(cluster, topic)[0][0]
    fill(cluster.bootstrap, topic)
    target = next(b.node_id for b in cluster.brokers if b.node_id != source)
    return topic, source, target


def test_reassignment_throttle_is_set_slows_the_move_and_verify_clears_it(cluster, tmp_path, kafka_target):
    slow, slow_from, slow_to = single_replica_topic(cluster)
    fast, fast_from, fast_to = single_replica_topic(cluster)
    bootstrap = cluster.bootstrap

    slow_plan = plan_file(tmp_path, "slow.json", slow, {0: [slow_from, slow_to]})
    out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", slow_plan, "--execute",
                        "--throttle", str(THROTTLE))
    assert "Successfully started partition reassignment" in out and f"{THROTTLE} B/s" in out, out

    # The tool's throttle, as DescribeConfigs reports it.
    for node in (slow_from, slow_to):
        got = dynamic(describe(bootstrap, "broker", str(node)), RATES)
        assert got == {k: str(THROTTLE) for k in RATES}, (node, got)
    got = dynamic(describe(bootstrap, "topic", slow), REPLICAS)
    assert pairs(got.get(REPLICAS[0])) == {f"0:{slow_from}"} and pairs(got.get(REPLICAS[1])) == {f"0:{slow_to}"}, got

    # An unthrottled move started later finishes first.
    fast_plan = plan_file(tmp_path, "fast.json", fast, {0: [fast_from, fast_to]})
    out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", fast_plan, "--execute", "--additional")
    assert "Successfully started partition reassignment" in out, out
    wait_for(f"the unthrottled move of {fast} onto broker {fast_to} complete",
             lambda: partition_states(cluster, fast)[0], timeout=90,
             until=lambda s: sorted(s[2]) == sorted([fast_from, fast_to]) and fast_to in s[3])
    throttled_state = partition_states(cluster, slow)[0]
    assert slow_to not in throttled_state[3], (
        f"the throttled move of {slow} (2 MiB at {THROTTLE} B/s) finished no later than an unthrottled one "
        f"started after it: {throttled_state}")

    # It completes; --verify removes the throttle.
    done = f"Reassignment of partition {slow}-0 is completed."
    out = wait_for("--verify reporting the throttled move complete",
                   lambda: reassign_tool(cluster, tmp_path, "--reassignment-json-file", slow_plan, "--verify"),
                   timeout=180, interval=2.0, until=lambda o: done in o)
    assert "Clearing broker-level throttles" in out and f"Clearing topic-level throttles on topic {slow}" in out, out
    for node in (slow_from, slow_to):
        got = dynamic(describe(bootstrap, "broker", str(node)), RATES)
        assert got == {}, (node, got)
    assert dynamic(describe(bootstrap, "topic", slow), REPLICAS) == {}

    if kafka_target != "apache":
        leader, follower = cluster.broker(slow_from), cluster.broker(slow_to)
        moved = metric(leader, "flotilla_replication_throttled_bytes_total", "leader")
        assert moved >= 1_000_000, f"the leader counted {moved} throttled bytes sent"
        held = (metric(leader, "flotilla_replication_throttle_held_back_total", "leader")
                + metric(follower, "flotilla_replication_throttle_held_back_total", "follower"))
        assert held > 0, "neither side of the move held a read back"
