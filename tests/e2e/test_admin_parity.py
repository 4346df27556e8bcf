"""Admin clients see a reassignment and the log dirs the same on Flotilla as on Kafka 4.1 (issue 24):
the same steps and the same assertions on both targets, three brokers with ids 1..3 each.

A topic is created with a manual assignment and filled (acks=all), then two of its partitions are
moved under Kafka 4.1's `kafka-reassign-partitions.sh --throttle 1`, so the moves stay in progress.
Kafka 4.1's Java AdminClient (tests/java/admin-parity/AdminParity.java, compiled by `java` from
source at test time against the cached kafka-tools jars) and kafka-python's KafkaAdminClient must
then both report exactly: the reassignments (replicas = target then removing, adding, removing),
the partitions (leader, full replica set, ISR without the adding replica), per broker one
log-dir entry per hosted replica (isFuture false, offsetLag 0, sizes equal and > 0 on in-sync
replicas, less on an adding one) and, through Java's describeReplicaLogDirs, each replica's dir
(none for a broker not hosting it), and the throttles the tool set (describeConfigs). After
`--cancel` (which clears the throttles) both see no reassignment and the replicas and
log dirs as before. `--verify` says the moves are in progress, then that they are not active and
not done. Only log dir paths and byte counts are normalised (to "> 0 and equal").

    pytest -m kube tests/e2e/test_admin_parity.py
    pytest tests/e2e/test_admin_parity.py --kafka-target=apache   # three KRaft Kafka 4.1 nodes
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.test_reassignment import fill, kp_admin, plan_file, reassign_tool
from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from tests.support.fleet import fleet_cluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]

PROGRAM = Path(__file__).resolve().parents[1] / "java" / "admin-parity" / "AdminParity.java"
BEFORE = {0: [1, 2], 1: [2, 3], 2: [3, 1]}
TARGET = {0: [1, 3], 1: [2, 1]}  # partition 2 stays: a partition not being moved is not listed
# What `--execute --throttle 1` sets (describeConfigs: value and source): both rates on every
# broker of the move, the current replicas of the moving partitions throttled as leaders, the
# adding ones as followers.
THROTTLES = {**{f"{b} {side}.replication.throttled.rate": "1 DYNAMIC_BROKER_CONFIG"
                for b in (1, 2, 3) for side in ("leader", "follower")},
             "topic leader.replication.throttled.replicas": "0:1,0:2,1:2,1:3 DYNAMIC_TOPIC_CONFIG",
             "topic follower.replication.throttled.replicas": "0:3,1:1 DYNAMIC_TOPIC_CONFIG"}
# Kafka: a deleted log's renamed directory goes after file.delete.delay.ms.
APACHE_OVERRIDES = {"file.delete.delay.ms": "500"}


@pytest.fixture
def cluster(kafka_target, tmp_path, request):
    kafka_tools.libs_or_skip()
    with fleet_cluster(kafka_target, tmp_path, request, overrides={"offsets.topic.replication.factor": "1"},
                       apache_overrides=APACHE_OVERRIDES) as c:
        assert sorted(b.node_id for b in c.brokers) == [1, 2, 3]
        yield c


def java_view(bootstrap: str, topic: str) -> dict:
    """The Java AdminClient's report, normalised as `python_view`'s."""
    cmd = [shutil.which("java") or "java", *kafka_tools.JVM_OPTS, "-cp", f"{kafka_tools.ensure_libs()}/*",
           str(PROGRAM), bootstrap, topic, "1", "2", "3"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"AdminParity.java exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    raw = json.loads(out.stdout.strip().splitlines()[-1])
    paths = {int(b): [d["path"] for d in dirs][0] for b, dirs in raw["logDirs"].items()}
    return {
        "reassignments": {int(p): (r["replicas"], r["adding"], r["removing"]) for p, r in raw["reassignments"].items()},
        "partitions": {int(p): (r["leader"], r["replicas"], sorted(r["isr"])) for p, r in raw["partitions"].items()},
        "elr": {int(p): (r["elr"], r["lastKnownElr"]) for p, r in raw["partitions"].items()},
        "dirs": {int(b): [(d["error"], d["totalBytes"], d["usableBytes"]) for d in dirs] for b, dirs in raw["logDirs"].items()},
        "replicas": {int(b): {int(p): (i["size"], i["offsetLag"], i["isFuture"]) for d in dirs for p, i in d["replicas"].items()}
                     for b, dirs in raw["logDirs"].items()},
        "throttles": raw["throttles"],
        # broker -> partition -> (in the broker's log dir, its lag, future dir, future lag)
        "replica_dirs": {(int(k.split(":")[0]), int(k.split(":")[1])): (
            r["current"] is not None and r["current"] == paths[int(k.split(":")[0])], r["currentLag"], r["future"], r["futureLag"])
            for k, r in raw["replicaDirs"].items()},
    }


def python_view(bootstrap: str, topic: str) -> dict:
    """kafka-python's report: ListPartitionReassignments, Metadata, DescribeLogDirs per broker."""
    admin = kp_admin(bootstrap)
    try:
        moving = admin.list_partition_reassignments()
        [described] = admin.describe_topics([topic])
        dirs = admin.describe_log_dirs(brokers=[1, 2, 3])
    finally:
        admin.close()
    return {
        "reassignments": {tp.partition: (r["replicas"], r["adding_replicas"], r["removing_replicas"])
                          for tp, r in moving.items() if tp.topic == topic},
        "partitions": {p["partition_index"]: (p["leader_id"], p["replica_nodes"], sorted(p["isr_nodes"]))
                       for p in described["partitions"]},
        "dirs": {b["broker"]: [(None if d["error_code"] == 0 else d["error_code"], d.get("total_bytes"), d.get("usable_bytes"))
                               for d in b["log_dirs"]] for b in dirs},
        "replicas": {b["broker"]: {p["partition_index"]: (p["partition_size"], p["offset_lag"], p["is_future_key"])
                                   for d in b["log_dirs"] for t in d["topics"] if t["name"] == topic for p in t["partitions"]}
                     for b in dirs},
    }


def check(view: dict, moving: dict[int, list[int]], who: str) -> dict[int, int]:
    """Assert a view of the topic with `moving` (partition -> target) in progress; return each
    partition's in-sync size."""
    placed = {p: moving[p] + [r for r in BEFORE[p] if r not in moving[p]] if p in moving else BEFORE[p] for p in BEFORE}
    assert view["reassignments"] == {p: (placed[p], [r for r in t if r not in BEFORE[p]], [r for r in BEFORE[p] if r not in t])
                                     for p, t in moving.items()}, (who, view)
    assert view["partitions"] == {p: (BEFORE[p][0], placed[p], sorted(BEFORE[p])) for p in BEFORE}, (who, view)
    if "elr" in view:
        assert view["elr"] == {p: ([], []) for p in BEFORE}, (who, view)
    # One log dir per broker, no error, KIP-827's total and usable bytes.
    assert set(view["dirs"]) == {1, 2, 3}, (who, view)
    for b, dirs in view["dirs"].items():
        assert len(dirs) == 1 and dirs[0][0] is None and 0 < dirs[0][2] <= dirs[0][1], (who, b, view)
    # An entry per hosted replica, none future, no lag; in-sync replicas equal in size.
    hosted = {b: sorted(p for p, r in placed.items() if b in r) for b in (1, 2, 3)}
    assert {b: sorted(r) for b, r in view["replicas"].items()} == hosted, (who, view)
    assert all(lag == 0 and future is False for r in view["replicas"].values() for _, lag, future in r.values()), (who, view)
    if "throttles" in view:  # kafka-reassign-partitions --throttle 1 sets them; --cancel clears them
        assert view["throttles"] == (THROTTLES if moving else {}), (who, view)
    if "replica_dirs" in view:  # describeReplicaLogDirs: a hosted replica in its broker's dir, the others nowhere
        assert view["replica_dirs"] == {(b, p): (True, 0, None, -1) if b in placed[p] else (False, -1, None, -1)
                                        for b in (1, 2, 3) for p in BEFORE}, (who, view)
    sizes = {}
    for p in BEFORE:
        insync = {view["replicas"][b][p][0] for b in BEFORE[p]}
        assert len(insync) == 1 and min(insync) > 0, (who, p, view)
        sizes[p] = insync.pop()
        for b in set(placed[p]) - set(BEFORE[p]):  # an adding replica holds part of it, at most
            assert view["replicas"][b][p][0] < sizes[p], (who, p, b, view)
    return sizes


def create(bootstrap: str) -> str:
    from kafka.admin import NewTopic

    topic = kafka_wire.unique_topic("parity")
    admin = kp_admin(bootstrap)
    try:
        admin.create_topics([NewTopic(topic, replica_assignments={p: r for p, r in BEFORE.items()})])
    finally:
        admin.close()
    return topic


def both_views(cluster, topic: str, moving: dict[int, list[int]]) -> dict[int, int]:
    """Both clients' views checked against `moving`; they agree on every in-sync size."""
    views = {"kafka-python": python_view(cluster.bootstrap, topic), "Java AdminClient": java_view(cluster.bootstrap, topic)}
    print(f"moving {moving}: {views}")  # shown when the test fails
    ours, java = (check(v, moving, who) for who, v in views.items())
    assert ours == java, (ours, java)
    return ours


def test_java_and_kafka_python_admin_clients_see_reassignments_and_log_dirs(cluster, tmp_path):
    topic = create(cluster.bootstrap)
    cluster.wait_leaders(topic, len(BEFORE))
    fill(cluster.bootstrap, topic)  # about 2.5 MiB per partition: more than one throttled fetch takes

    def in_sync():
        v = python_view(cluster.bootstrap, topic)
        return v if all(len({v["replicas"].get(b, {}).get(p, (None,))[0] for b in r}) == 1 for p, r in BEFORE.items()) else None
    wait_for("every replica of the filled topic the same size", in_sync, timeout=60)
    full = both_views(cluster, topic, {})

    path = plan_file(tmp_path, "target.json", topic, TARGET)
    out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", path, "--execute", "--throttle", "1")
    assert "Successfully started partition reassignment" in out, out
    wait_for("the adding replicas' logs created", lambda: python_view(cluster.bootstrap, topic)["replicas"],
             timeout=60, until=lambda r: 0 in r.get(3, {}) and 1 in r.get(1, {}))
    assert both_views(cluster, topic, TARGET) == full
    narrowed(cluster.bootstrap, topic)
    out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", path, "--verify")
    assert all(f"Reassignment of partition {topic}-{p} is still in progress." in out for p in TARGET), out

    out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", path, "--cancel")
    assert "Successfully cancelled partition reassignment" in out, out
    wait_for("no reassignment and only the original replicas' logs", lambda: python_view(cluster.bootstrap, topic),
             timeout=60, until=lambda v: v["reassignments"] == {} and 0 not in v["replicas"][3] and 1 not in v["replicas"][1])
    assert both_views(cluster, topic, {}) == full
    out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", path, "--verify")
    for p, t in TARGET.items():
        want = f"There is no active reassignment of partition {topic}-{p}, but replica set is {_ids(BEFORE[p])} rather than {_ids(t)}."
        assert want in out, out


def narrowed(bootstrap: str, topic: str) -> None:
    """Asked about some partitions only: a partition not moving, one that does not exist and an
    unknown topic are left out of ListPartitionReassignments; DescribeLogDirs answers for the
    partitions asked about that the broker holds."""
    from kafka import TopicPartition as KTP

    admin = kp_admin(bootstrap)
    try:
        moving = admin.list_partition_reassignments({topic: [0, 2, 7], "no-such-" + topic: [0]})
        [dirs] = admin.describe_log_dirs({topic: [0, 2, 7]}, brokers=[3])
    finally:
        admin.close()
    assert moving == {KTP(topic, 0): {"replicas": [1, 3, 2], "adding_replicas": [3], "removing_replicas": [2]}}, moving
    held = sorted(p["partition_index"] for d in dirs["log_dirs"] for t in d["topics"] if t["name"] == topic
                  for p in t["partitions"])
    assert held == [0, 2], dirs


def _ids(replicas: list[int]) -> str:
    return ",".join(map(str, replicas))
