"""Client quotas do not throttle replication (issue 18 item 2): with a small default
`consumer_byte_rate` and `request_percentage` for every client-id, followers' fetches (and their
OffsetForLeaderEpoch once their connection has proved itself a broker's) are exempt, as Kafka
exempts them (KafkaApis.handleFetchRequest: sendResponseExemptThrottle), so the ISR stays full and
acks=all writes are acknowledged, while a consumer under the same default is throttled.

    pytest -m kube tests/e2e/test_replication_quotas.py
"""

from __future__ import annotations

import datetime

import pytest
from kio.static.primitive import i32, i64

from tests.e2e.test_quotas import alter_quotas, describe_quotas
from tests.e2e.test_replication import create_topic, metric, partition_states, producer, wait_replicas_identical
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.flotilla_only("replication on a Flotilla cluster on Kubernetes metadata")]

OVERRIDES = {"replica.lag.time.max.ms": "10000", "replica.fetch.backoff.ms": "200"}
CONSUMER_BYTE_RATE = 16384  # 16 KiB/s: followers held to it would need minutes for what is written below
REQUEST_PERCENTAGE = 1.0
WRITER = "isr-writer"  # the test's own producer: a quota of its own, above the default
RECORDS, RECORD_SIZE, PARTITIONS = 3000, 1024, 3


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


def consumer_throttle_ms(bootstrap: str, topic: str, partition: int) -> int:
    """throttle_time_ms of a consumer's Fetch (default client-id quota) from offset 0."""
    from kio.schema.fetch.v11 import request as m

    req = m.FetchRequest(replica_id=i32(-1), max_wait=datetime.timedelta(0), min_bytes=i32(1), max_bytes=i32(1 << 20),
                         isolation_level=0, session_id=i32(0), session_epoch=i32(-1), forgotten_topics_data=(),
                         rack_id="", topics=(m.FetchTopic(topic=topic, partitions=(m.FetchPartition(
                             partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                             log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),))
    with kafka_wire.KafkaConnection(bootstrap, client_id="a-consumer") as conn:
        resp = conn.request(req)
    return int(resp.throttle_time.total_seconds() * 1000)


@pytest.mark.timeout(300)
def test_default_client_quotas_do_not_throttle_followers(cluster):
    a = cluster.brokers[0]
    topic = create_topic(a, PARTITIONS, configs={"min.insync.replicas": "2"}, prefix="quota-isr")
    cluster.wait_leaders(topic, PARTITIONS)
    assert all(set(s[3]) == {1, 2, 3} for s in partition_states(cluster, topic).values())

    default = {"consumer_byte_rate": CONSUMER_BYTE_RATE, "request_percentage": REQUEST_PERCENTAGE}
    assert alter_quotas(a.bootstrap, [({"client-id": None}, default),
                                      ({"client-id": WRITER}, {"request_percentage": 1e6})]) == [(0, None)] * 2
    expected = {frozenset({("client-id", None)}): {k: float(v) for k, v in default.items()},
                frozenset({("client-id", WRITER)}): {"request_percentage": 1e6}}
    for b in cluster.brokers:
        wait_for(f"broker {b.node_id} to hold the quotas",
                 lambda: describe_quotas(b.bootstrap, [("client-id", 2, None)]) == (0, expected), timeout=30)

    p = producer(cluster.bootstrap, **{"client.id": WRITER, "message.timeout.ms": 90000})
    errors: list = []
    for i in range(RECORDS):
        p.produce(topic, partition=i % PARTITIONS, value=b"%06d" % i + b"x" * (RECORD_SIZE - 6),
                  on_delivery=lambda err, msg: errors.append(err) if err is not None else None)
        p.poll(0)
    left = p.flush(120)
    assert left == 0 and not errors, f"{left} unacknowledged, errors: {errors[:5]} ({len(errors)})"

    # Every follower holds every record, and none left an ISR on the way.
    wait_replicas_identical(cluster, topic, PARTITIONS)
    states = partition_states(cluster, topic)
    assert all(set(s[3]) == {1, 2, 3} for s in states.values()), states
    for b in cluster.brokers:
        assert metric(b, "flotilla_isr_shrinks_total") == 0.0, f"broker {b.node_id} shrank an ISR"
    # The default is in force for clients: a consumer reading the same data is throttled.
    committed = 0
    for q, s in states.items():
        with kafka_wire.connect(cluster.broker(s[0]).bootstrap) as conn:
            committed += conn.list_offsets(topic, q, -1)
    assert committed == RECORDS
    assert consumer_throttle_ms(cluster.broker(states[0][0]).bootstrap, topic, 0) > 0
