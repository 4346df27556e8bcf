"""Manual replica assignments (issue 24) on three brokers, as Kafka 4.1 does them:

- `kafka-topics.sh --create --replica-assignment` (Kafka's TopicCommand from the kafka-tools jars)
  places every partition on exactly the brokers listed, the first one leading; `--alter
  --partitions --replica-assignment` places the new partitions the same way; the brokers hold the
  partitions' logs exactly where assigned, and a record written to each partition reads back;
- kafka-python's admin client gets Kafka's refusals, codes and messages: a broker twice, an
  unknown broker, lists of different lengths, a partition index twice or missing, assignments with
  num_partitions or replication_factor set (INVALID_REQUEST); for CreatePartitions a list count
  other than the partitions added and a list of another length than the topic's replication factor.

    pytest -m kube tests/e2e/test_manual_assignment.py
    pytest tests/e2e/test_manual_assignment.py --kafka-target=apache   # three KRaft Kafka 4.1 nodes
"""

from __future__ import annotations

import subprocess

import pytest

from tests.e2e.test_reassignment import kp_admin, logs_on
from tests.e2e.test_replication import partition_states, producer, read_all
from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from tests.support.fleet import fleet_cluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]

INVALID_REPLICA_ASSIGNMENT, INVALID_REQUEST = 39, 42


@pytest.fixture
def cluster(kafka_target, tmp_path, request):
    kafka_tools.libs_or_skip()
    with fleet_cluster(kafka_target, tmp_path, request, overrides={"offsets.topic.replication.factor": "1"}) as c:
        yield c


def topics_tool(bootstrap: str, *args: str) -> str:
    """Kafka 4.1's kafka-topics.sh; its stdout (a failure shows both streams)."""
    out = subprocess.run(kafka_tools.command("TopicCommand", "--bootstrap-server", bootstrap, *args),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kafka-topics {' '.join(args)}: {out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def spec(plan: list[list[int]]) -> str:
    return ",".join(":".join(map(str, r)) for r in plan)


def refused(result) -> dict[str, tuple[int, str | None]]:
    """topic -> (error code, message) from kafka-python's CreateTopics (a dict) or CreatePartitions
    (a response) answer."""
    rows = result["topics"] if isinstance(result, dict) else result.to_dict()["results"]
    return {r["name"]: (r["error_code"], r["error_message"]) for r in rows}


def test_replica_assignment_create_alter_and_refusals(cluster):
    a, b, c = sorted(x.node_id for x in cluster.brokers)
    topic = kafka_wire.unique_topic("manual")
    plan = [[c, a], [a, b], [b, c]]
    topics_tool(cluster.bootstrap, "--create", "--topic", topic, "--replica-assignment", spec(plan))

    def placed(want: list[list[int]]):
        return wait_for(f"{topic} placed as {want} with the first replica leading",
                        lambda: partition_states(cluster, topic), timeout=60,
                        until=lambda s: len(s) == len(want) and all(
                            list(s[p][2]) == r and s[p][0] == r[0] and sorted(s[p][3]) == sorted(r)
                            for p, r in enumerate(want)))
    placed(plan)

    # --alter: Kafka's tool takes the whole list and sends the new partitions' part.
    grown = plan + [[b, a], [c, b]]
    topics_tool(cluster.bootstrap, "--alter", "--topic", topic, "--partitions", "5", "--replica-assignment", spec(grown))
    placed(grown)
    wait_for(f"every broker holding exactly its assigned logs of {topic}",
             lambda: {x.node_id: logs_on(x, topic) for x in cluster.brokers}, timeout=60,
             until=lambda held: all(held[n] == sorted(f"{topic}-{p}" for p, r in enumerate(grown) if n in r)
                                    for n in held))
    p = producer(cluster.bootstrap)
    for i in range(len(grown)):
        p.produce(topic, partition=i, value=b"placed-%d" % i)
    assert p.flush(60) == 0, "records to the placed partitions were not acknowledged"
    got = read_all(cluster.bootstrap, topic, len(grown), expect=len(grown))
    assert {i: [v for _, v in got[i]] for i in got} == {i: [b"placed-%d" % i] for i in range(len(grown))}, got

    admin = kp_admin(cluster.bootstrap)
    try:
        t = kafka_wire.unique_topic("bad")
        asked = {
            t + "-twice": {"assignments": {0: [a, a]}},
            t + "-unknown": {"assignments": {0: [a, 99]}},
            t + "-lengths": {"assignments": {0: [a, b], 1: [c]}},
            t + "-gap": {"assignments": {0: [a], 2: [b]}},
            t + "-count": {"num_partitions": 2, "assignments": {0: [a], 1: [b]}},
            t + "-factor": {"replication_factor": 1, "assignments": {0: [a]}},
        }
        got = refused(admin.create_topics(asked, timeout_ms=30000, raise_errors=False))
        assert got == {
            t + "-twice": (INVALID_REPLICA_ASSIGNMENT, f"The manual partition assignment includes the broker {a} more than once."),
            t + "-unknown": (INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes broker 99, but no such broker is registered."),
            t + "-lengths": (INVALID_REPLICA_ASSIGNMENT,
                             "The manual partition assignment includes a partition with 1 replica(s), but this is not "
                             "consistent with previous partitions, which have 2 replica(s)."),
            t + "-gap": (INVALID_REPLICA_ASSIGNMENT, "partitions should be a consecutive 0-based integer sequence"),
            t + "-count": (INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions was not set to -1."),
            t + "-factor": (INVALID_REQUEST,
                            "A manual partition assignment was specified, but replication factor was not set to -1."),
        }, got
        md = cluster.metadata(cluster.brokers[0], [])
        assert not [x.name for x in md.topics if str(x.name).startswith(t)], "a refused topic was created"

        got = refused(admin.create_partitions({topic: {"count": 7, "assignments": [[a, b]]}}, timeout_ms=30000,
                                              raise_errors=False))
        assert got == {topic: (INVALID_REPLICA_ASSIGNMENT,
                               "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified.")}, got
        got = refused(admin.create_partitions({topic: {"count": 6, "assignments": [[a, b, c]]}}, timeout_ms=30000,
                                              raise_errors=False))
        assert got == {topic: (INVALID_REPLICA_ASSIGNMENT,
                               "The manual partition assignment includes a partition with 3 replica(s), but this is "
                               "not consistent with previous partitions, which have 2 replica(s).")}, got
        got = refused(admin.create_partitions({topic: {"count": 6, "assignments": [[b, b]]}}, timeout_ms=30000,
                                              raise_errors=False))
        assert got == {topic: (INVALID_REPLICA_ASSIGNMENT,
                               f"The manual partition assignment includes the broker {b} more than once.")}, got
    finally:
        admin.close()
    assert len(partition_states(cluster, topic)) == 5, "a refused CreatePartitions added partitions"
