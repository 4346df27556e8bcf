"""Stray logs at start-up (issue 24; Kafka's KAFKA-14616 handling) on three brokers: one broker
holds a replica of three topics, each with records, and stops; meanwhile one topic is deleted and
another's partition is reassigned away from it (kafka-python's admin client). When it starts
again, the partition directories of those two are gone from its log dir and it answers for
neither, while the third topic's partition, still assigned to it, is kept and back in sync.

Both set the deleted topic's directory aside as `<topic>-<n>.<id>-stray`, kept on disk; the
partition moved away Kafka 4.1 renames `-stray` too, Flotilla deletes (the metadata names where
it lives now), so only Flotilla is asked to leave nothing of it.

    pytest -m kube tests/e2e/test_stray_logs.py
    pytest tests/e2e/test_stray_logs.py --kafka-target=apache   # three KRaft Kafka 4.1 nodes
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from tests.e2e.test_reassignment import kp_admin
from tests.e2e.test_replication import partition_states, producer
from flotilla.testenv import kafka_wire
from tests.support.fleet import fleet_cluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(420)]


@pytest.fixture
def cluster(kafka_target, tmp_path, request):
    with fleet_cluster(kafka_target, tmp_path, request, overrides={"offsets.topic.replication.factor": "1"}) as c:
        yield c


def dirs(broker) -> list[str]:
    d = Path(broker.log_dirs)
    return sorted(e.name for e in d.iterdir() if e.is_dir()) if d.exists() else []


def write(bootstrap: str, topics: list[str]) -> None:
    """30 records to partition 0 of each topic, acks=all; the producer is gone afterwards (a live
    one refreshing its metadata would create a deleted topic again: auto.create.topics.enable)."""
    p = producer(bootstrap)
    for i in range(30):
        for t in topics:
            p.produce(t, partition=0, value=b"%s-%d" % (t.encode(), i))
    assert p.flush(60) == 0, "records not acknowledged"
    del p
    gc.collect()


def answer(broker, topic: str) -> str:
    """What the broker says to a ListOffsets of the topic's partition 0 ("ok" if it answers one)."""
    try:
        with kafka_wire.connect(broker.bootstrap, timeout=10.0) as conn:
            conn.list_offsets(topic, 0)
        return "ok"
    except RuntimeError as e:
        return str(e)


def test_logs_deleted_or_moved_away_while_down_are_removed_at_start(cluster, kafka_target):
    controller = int(cluster.metadata(cluster.brokers[0], []).controller_id)
    down = next(b for b in cluster.brokers if b.node_id != controller)
    c = down.node_id
    a, b = sorted(x.node_id for x in cluster.brokers if x.node_id != c)
    base = kafka_wire.unique_topic("stray")
    gone, moved, kept = base + "-gone", base + "-moved", base + "-kept"
    plan = {gone: [c, a, b], moved: [b, c], kept: [c, a]}
    admin = kp_admin(cluster.bootstrap)
    try:
        admin.create_topics({t: {"assignments": {0: r}} for t, r in plan.items()}, timeout_ms=30000)
        for t, r in plan.items():
            wait_for(f"{t} on {r}, all in sync", lambda t=t: partition_states(cluster, t), timeout=60,
                     until=lambda s, r=r: len(s) == 1 and s[0][0] == r[0] and sorted(s[0][3]) == sorted(r))
        write(cluster.bootstrap, list(plan))
        for t in plan:  # acks=all with every replica in the ISR: broker c holds them too
            assert f"{t}-0" in dirs(down), (t, dirs(down))

        down.stop()
        # A new admin client on the running brokers: Kafka's Metadata names a random broker as the
        # controller, and the first client may have settled on the stopped one.
        admin.close()
        admin = kp_admin(",".join(x.bootstrap for x in cluster.running()))
        admin.delete_topics([gone], timeout_ms=30000)
        from kafka import TopicPartition as KTP

        assert admin.alter_partition_reassignments({KTP(moved, 0): [a, b]}) == {KTP(moved, 0): None}
        wait_for(f"{moved} moved to [{a}, {b}] while broker {c} is down", lambda: partition_states(cluster, moved),
                 timeout=90, until=lambda s: list(s[0][2]) == [a, b] and sorted(s[0][3]) == [a, b])
        wait_for(f"{gone} deleted", lambda: [str(t.name) for t in cluster.metadata(cluster.running()[0], []).topics],
                 timeout=60, until=lambda names: gone not in names)
        assert f"{gone}-0" in dirs(down) and f"{moved}-0" in dirs(down), dirs(down)  # nobody removed them yet
    finally:
        admin.close()

    down.start()
    held = wait_for(f"broker {c} without the logs of {gone} and {moved}", lambda: dirs(down), timeout=120,
                    until=lambda names: f"{gone}-0" not in names and f"{moved}-0" not in names)
    assert f"{kept}-0" in held, f"the still-assigned partition was removed: {held}"
    assert [n for n in held if n.startswith(f"{gone}-0.") and n.endswith("-stray")], held
    if kafka_target != "apache":  # Kafka keeps that one renamed -stray too; Flotilla deletes it
        assert not [n for n in held if n.startswith(f"{moved}-0")], held
    wait_for(f"broker {c} back in the ISR of {kept}", lambda: partition_states(cluster, kept), timeout=90,
             until=lambda s: sorted(s[0][3]) == sorted(plan[kept]))
    assert "not_leader_or_follower" in answer(down, moved).lower(), answer(down, moved)
    assert "unknown_topic_or_partition" in answer(down, gone).lower(), answer(down, gone)
