"""AlterReplicaLogDirs (KIP-113) on a broker with two log dirs, over real sockets: through
kafka-python's admin (`alter_replica_log_dirs`; DescribeLogDirs on the wire, kio, for is_future)
a replica moved to the other dir while a producer keeps writing and a consumer keeps reading
holds every acknowledged record once, DescribeLogDirs then names the new dir, the old dir no longer holds it; Kafka's errors for a dir
that is not one of the broker's, a relative path, an unknown partition and the dir it is in; and
Kafka 4.1's `kafka-reassign-partitions.sh` with "log_dirs" (the Java admin's alterReplicaLogDirs,
then --verify). Runs against Apache Kafka 4.1 too (`--kafka-target=apache`).
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import pytest
from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from tests.support.clients import ConfluentFamily
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

BACKLOG_BATCHES = 40  # 40 x 50 records x 10 KB: about 20 MB to copy, many copy steps


def alter(bootstrap: str, moves: list[tuple[str, str, int]]) -> dict[tuple[str, int], ErrorCode]:
    """kafka-python's admin alter_replica_log_dirs of [(path, topic, partition)] on broker 1 (the
    test broker's node id on both targets); {(topic, partition): error}."""
    from kafka import KafkaAdminClient, TopicPartitionReplica

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        answers = admin.alter_replica_log_dirs({TopicPartitionReplica(t, p, 1): path for path, t, p in moves})
    finally:
        admin.close()
    return {(r.topic, r.partition): ErrorCode(error.errno) for r, error in answers.items()}


def placement(bootstrap: str, topic: str) -> dict[str, list[bool]]:
    """DescribeLogDirs v4 of `topic`-0: {log dir: [is_future of each replica of it there]}."""
    req = DescribeLogDirsRequest(topics=(DescribableLogDirTopic(topic=topic, partitions=(i32(0),)),))
    with kafka_wire.connect(bootstrap) as conn:
        resp = conn.request(req)
    assert resp.error_code == ErrorCode.none, resp
    return {r.log_dir: [p.is_future_key for t in r.topics if t.name == topic for p in t.partitions]
            for r in resp.results}


class Writer(threading.Thread):
    """Produces one-record batches (acks=all) until stopped; remembers what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[bytes] = []
        self.failures: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with kafka_wire.connect(self.bootstrap) as conn:
            i = 0
            while not self.stop.is_set():
                value = b"live-%06d" % i
                resp = conn.produce(self.topic, 0, kafka_wire.build_batch([(b"k", value)]))
                if resp.error_code == ErrorCode.none:
                    self.acked.append(value)
                else:
                    self.failures.append(f"{value!r}: {resp.error_code!r}")
                i += 1


@pytest.fixture
def two_dir_broker(broker_factory, tmp_path: Path):
    dirs = [tmp_path / "dir-a", tmp_path / "dir-b"]
    for d in dirs:
        d.mkdir()
    b = broker_factory({"log.dirs": ",".join(str(d) for d in dirs)})
    return b, [str(d.absolute()) for d in dirs]


def test_a_replica_moves_to_the_other_dir_under_load(two_dir_broker):
    b, dirs = two_dir_broker
    topic = kafka_wire.unique_topic("move")
    backlog = []
    with kafka_wire.connect(b.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
        for n in range(BACKLOG_BATCHES):
            values = [b"old-%04d-%02d-" % (n, i) + b"x" * 10_000 for i in range(50)]
            batch = kafka_wire.build_batch([(b"k", v) for v in values])
            assert conn.produce_when_led(topic, 0, batch).error_code == ErrorCode.none
            backlog += values
    [current] = [d for d, replicas in placement(b.bootstrap, topic).items() if replicas == [False]]
    [target] = [d for d in dirs if d != current]
    consumer = ConfluentFamily().consumer(b.bootstrap, topic)
    writer = Writer(b.bootstrap, topic)
    writer.start()
    try:
        wait_for("the writer to get acknowledgements", lambda: len(writer.acked) >= 20, timeout=30)
        assert alter(b.bootstrap, [(target, topic, 0)]) == {(topic, 0): ErrorCode.none}

        def moved():
            consumer.pump(0.1)
            where = placement(b.bootstrap, topic)
            return where if where[target] == [False] and where[current] == [] else None
        where = wait_for("DescribeLogDirs to show the replica in the new dir only", moved, timeout=90, interval=0.2)
        acked_before_end = len(writer.acked)
        wait_for("acknowledgements after the move", lambda: len(writer.acked) >= acked_before_end + 20, timeout=30)
    finally:
        writer.stop.set()
        writer.join(30)
    assert not writer.failures, writer.failures[:5]
    assert all(flags == [] for d, flags in where.items() if d != target), where
    expected = backlog + writer.acked
    got = consumer.take(len(expected), timeout=60)
    consumer.settle(1.0)
    got = list(consumer.records)
    consumer.close()
    values = [r.value for r in got]
    assert len(values) == len(set(values)), "a record was read twice"
    assert values == [v.decode() for v in expected], "records lost, duplicated or reordered by the move"
    assert [r.offset for r in got] == list(range(len(expected)))
    # The old dir no longer holds the partition (Apache Kafka renames it `-delete` and deletes it
    # file.delete.delay.ms later; Flotilla deletes it as soon as its pending flushes are done).
    old = Path(current)
    if b.kind == "flotilla":
        wait_for("the old dir to be deleted", lambda: not [e for e in old.iterdir() if e.name.startswith(f"{topic}-0")],
                 timeout=30)
    assert not (old / f"{topic}-0").exists()
    assert (Path(target) / f"{topic}-0").is_dir()
    assert not [e for e in Path(target).iterdir() if e.name.endswith("-future")]


def test_kafkas_errors(two_dir_broker, tmp_path: Path):
    b, dirs = two_dir_broker
    topic = kafka_wire.unique_topic("move-errors")
    with kafka_wire.connect(b.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
        conn.wait_for_leaders(topic, 1)
    [current] = wait_for("the replica in DescribeLogDirs",
                         lambda: [d for d, replicas in placement(b.bootstrap, topic).items() if replicas == [False]])
    answers = alter(b.bootstrap, [
        (str(tmp_path / "not-a-log-dir"), topic, 0),
        ("dir-a", "relative", 0),
        (dirs[0], "no-such-topic", 0),
        (dirs[0], topic, 7),
        (current, "same-dir", 0),
    ])
    # A partition named under several dirs takes the last, so each case above has its own topic or index.
    assert answers[(topic, 0)] == ErrorCode.log_dir_not_found
    assert answers[("relative", 0)] == ErrorCode.log_dir_not_found  # Kafka compares absolute paths
    assert answers[("no-such-topic", 0)] == ErrorCode.unknown_topic_or_partition
    assert answers[(topic, 7)] == ErrorCode.unknown_topic_or_partition
    assert answers[("same-dir", 0)] == ErrorCode.unknown_topic_or_partition
    assert alter(b.bootstrap, [(current, topic, 0)]) == {(topic, 0): ErrorCode.none}  # already there
    assert placement(b.bootstrap, topic)[current] == [False]


def test_kafka_reassign_partitions_moves_a_replica_between_dirs(two_dir_broker, tmp_path: Path):
    """The tool sends AlterReplicaLogDirs through the Java admin, and --verify reads DescribeLogDirs."""
    b, dirs = two_dir_broker
    try:
        kafka_tools.ensure_libs()
    except kafka_tools.ToolsMissing as e:
        pytest.skip(str(e))
    topic = kafka_wire.unique_topic("move-tool")
    with kafka_wire.connect(b.bootstrap) as conn:
        assert conn.create_topic(topic, 1) == ErrorCode.none
        for n in range(20):
            assert conn.produce_when_led(topic, 0, kafka_wire.build_batch([(b"k", b"v%d" % n)])).error_code == ErrorCode.none
        [leader] = [p.leader_id for t in conn.metadata([topic]).topics for p in t.partitions]
    [current] = [d for d, replicas in placement(b.bootstrap, topic).items() if replicas == [False]]
    [target] = [d for d in dirs if d != current]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": 0, "replicas": [int(leader)], "log_dirs": [target]}]}))

    def tool(*args: str) -> str:
        out = subprocess.run(kafka_tools.command("reassign.ReassignPartitionsCommand", "--bootstrap-server",
                                                 b.bootstrap, *args), capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, f"kafka-reassign-partitions {args}: {out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        return out.stdout

    tool("--execute", "--reassignment-json-file", str(plan))
    verified = wait_for("--verify to report the replica in its new dir",
                        lambda: tool("--verify", "--reassignment-json-file", str(plan)),
                        until=lambda out: f"replica {topic}-0-{leader} completed" in out,
                        timeout=60, interval=1.0)
    assert f"Reassignment of partition {topic}-0 is completed" in verified, verified
    assert placement(b.bootstrap, topic)[target] == [False]
    with kafka_wire.connect(b.bootstrap) as conn:
        assert conn.list_offsets(topic, 0) == 20
