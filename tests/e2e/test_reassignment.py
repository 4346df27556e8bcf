"""Partition reassignment (KIP-455, issue 24) on three brokers, while an idempotent acks=all
producer keeps writing:

- Kafka 4.1's `kafka-reassign-partitions.sh` (ReassignPartitionsCommand, from the kafka-tools
  jars) proposes a plan off one broker (--generate), starts it (--execute) and waits for it
  (--verify); afterwards every partition has exactly the planned replicas and ISR, and the broker
  moved off holds no log of the topic any more;
- a move onto a broker that cannot catch up (Flotilla: SIGSTOPped, still registered: long Leases;
  Kafka: a 1 B/s reassignment throttle; Flotilla's throttles came later and are tested in
  test_replication_throttle.py) stays in progress: ListPartitionReassignments (the tool's --list) shows the adding and removing replicas, Metadata the full replica set, `kafka-topics.sh --describe` (DescribeTopicPartitions) the full set with the adding and removing ones, the broker is not in any ISR; --cancel reverts to the
  original replicas, and the resumed broker deletes what it may have started;
- kafka-python's alter_partition_reassignments moves a leader's partition onto that broker (and
  list_partition_reassignments shows nothing left afterwards) and answers Kafka's errors (a broker twice, an unknown broker, an unknown partition, cancelling
  nothing);
- Flotilla's /metrics count the bytes a reassignment moved (in on the new replicas, out on their
  leaders) and the partitions being reassigned;
- then every acknowledged record is read exactly once.

    pytest -m kube tests/e2e/test_reassignment.py
    pytest tests/e2e/test_reassignment.py --kafka-target=apache   # three KRaft Kafka 4.1 nodes
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from flotilla_operator.clients import reassignment_admin as ra

from tests.e2e.test_replication import create_topic, partition_states, producer, read_all
from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv.brokers.fleet import Fleet
from tests.support.fleet import fleet_cluster
from tests.support.prometheus import metric
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(420)]

PARTITIONS = 3
# Long Leases: a SIGSTOPped broker stays registered for the whole test (so a reassignment onto it
# stays in progress instead of its replica being dropped as dead).
OVERRIDES = {"flotilla.metadata.lease.duration.ms": "60000", "replica.lag.time.max.ms": "10000",
             "replica.fetch.backoff.ms": "200", "offsets.topic.replication.factor": "1"}
# Kafka's names: a broker stays registered (unfenced) for broker.session.timeout.ms; a deleted
# log's renamed directory goes after file.delete.delay.ms.
APACHE_OVERRIDES = {"broker.session.timeout.ms": "60000", "file.delete.delay.ms": "500"}


@pytest.fixture
def cluster(kafka_target, tmp_path, request):
    kafka_tools.libs_or_skip()
    with fleet_cluster(kafka_target, tmp_path, request, overrides=OVERRIDES, apache_overrides=APACHE_OVERRIDES) as c:
        yield c


class Writer(threading.Thread):
    """An idempotent acks=all producer writing increasing numbers round-robin over the partitions."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed: list[str] = []
        self.stop = threading.Event()
        self.unflushed = -1

    def run(self) -> None:
        p = producer(self.bootstrap, **{"message.timeout.ms": 300000, "request.timeout.ms": 5000})

        def report(err, msg) -> None:
            if err is None:
                self.acked.append((msg.partition(), msg.offset(), msg.value()))
            else:
                self.failed.append(str(err))
        i = 0
        while not self.stop.is_set():
            try:
                p.produce(self.topic, partition=i % PARTITIONS, value=b"%08d" % i, on_delivery=report)
            except BufferError:
                p.poll(0.1)
                continue
            i += 1
            p.poll(0.005)
        self.unflushed = p.flush(300)


def fill(bootstrap: str, topic: str) -> None:
    """About 2.5 MiB more in each partition (more than one follower fetch takes), acks=all."""
    p = producer(bootstrap)
    pad = b"x" * 65536
    for i in range(40 * PARTITIONS):
        p.produce(topic, partition=i % PARTITIONS, value=b"fill-%06d-" % i + pad)
        p.poll(0)
    assert p.flush(120) == 0, "the fill records were not all acknowledged"


def reassign_tool(cluster: Fleet, tmp_path: Path, *args: str, bootstrap: str | None = None) -> str:
    """Run Kafka 4.1's kafka-reassign-partitions.sh; its stdout (a failure shows both streams)."""
    config = tmp_path / "admin.properties"
    config.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=120000\n")
    out = subprocess.run(kafka_tools.command("reassign.ReassignPartitionsCommand", "--bootstrap-server",
                                             bootstrap or cluster.bootstrap, "--command-config", str(config), *args),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"kafka-reassign-partitions {args[-1]}: {out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def plan_file(tmp_path: Path, name: str, topic: str, plan: dict[int, list[int]]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)} for p, r in plan.items()]}))
    return str(path)


def logs_on(broker, topic: str) -> list[str]:
    """The topic's partition directories in a broker's log dir (Kafka's renamed ones included)."""
    d = Path(broker.log_dirs)
    return sorted(e.name for e in d.iterdir() if e.is_dir() and e.name.startswith(f"{topic}-")) if d.exists() else []


def wait_replicas(cluster: Fleet, topic: str, want: dict[int, list[int]], via=None) -> dict:
    """Until Metadata shows exactly `want` as every partition's replicas and ISR, with a leader."""
    def ok(states) -> bool:
        return all(s[0] in want[p] and list(s[2]) == want[p] and set(s[3]) == set(want[p]) for p, s in states.items())
    return wait_for(f"replicas and ISR of {topic} at {want}", lambda: partition_states(cluster, topic, via),
                    timeout=90, until=ok)


def kp_admin(bootstrap: str):
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)


def test_reassign_partitions_tool_execute_verify_cancel_and_admin_client(cluster, tmp_path, kafka_target):
    from kafka import TopicPartition as KTP
    from kafka.errors import InvalidReplicationAssignmentError, NoReassignmentInProgressError, UnknownTopicOrPartitionError

    topic = create_topic(cluster.brokers[0], PARTITIONS, rf=2, prefix="move", configs={"min.insync.replicas": "2"})
    cluster.wait_leaders(topic, PARTITIONS)
    before = wait_for("two in-sync replicas per partition", lambda: partition_states(cluster, topic), timeout=60,
                      until=lambda s: len(s) == PARTITIONS and all(len(v[3]) == 2 for v in s.values()))
    # Move everything off a broker that is not Flotilla's controller (it is SIGSTOPped later).
    controller = int(cluster.metadata(cluster.brokers[0], []).controller_id)
    off = next(b.node_id for b in cluster.brokers if b.node_id != controller
               and any(b.node_id in s[2] for s in before.values()))
    rest = [b.node_id for b in cluster.brokers if b.node_id != off]
    others = ",".join(cluster.broker(n).bootstrap for n in rest)

    writer = Writer(others, topic)
    writer.start()
    try:
        wait_for("the producer's first acknowledgements", lambda: len(writer.acked), timeout=60, until=lambda n: n > 50)

        # --generate: a plan over the two other brokers.
        topics_json = tmp_path / "topics.json"
        topics_json.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
        out = reassign_tool(cluster, tmp_path, "--topics-to-move-json-file", str(topics_json),
                            "--broker-list", ",".join(map(str, rest)), "--generate")
        proposed = json.loads(out.split("Proposed partition reassignment configuration")[1].strip().splitlines()[0])
        plan = {int(p["partition"]): [int(r) for r in p["replicas"]] for p in proposed["partitions"]}
        assert sorted(plan) == list(range(PARTITIONS)) and all(sorted(r) == rest for r in plan.values()), out

        # --execute, then --verify until done.
        path = plan_file(tmp_path, "plan.json", topic, plan)
        out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", path, "--execute")
        assert "Successfully started partition reassignment" in out, out
        done = [f"Reassignment of partition {topic}-{p} is completed." for p in plan]
        wait_for("--verify reporting every partition moved",
                 lambda: reassign_tool(cluster, tmp_path, "--reassignment-json-file", path, "--verify"),
                 timeout=120, interval=1.0, until=lambda o: all(line in o for line in done))
        wait_replicas(cluster, topic, plan)
        if kafka_target != "apache":  # Kafka's ReassignmentBytesIn/OutPerSec, as Prometheus counters
            moved = {name: sum(metric(b.metrics_url, name) for b in cluster.brokers)
                     for name in ("flotilla_reassignment_bytes_in_total", "flotilla_reassignment_bytes_out_total")}
            assert all(v > 0 for v in moved.values()), moved
        wait_for(f"broker {off} deleting the moved logs", lambda: logs_on(cluster.broker(off), topic),
                 timeout=60, until=lambda names: names == [])

        # A move onto a broker that cannot catch up stays in progress, and --cancel reverts it.
        # Flotilla: that broker is SIGSTOPped (written before Flotilla had throttles). Kafka: a 1 B/s
        # throttle over more than one fetch's worth of data (Kafka's Metadata names a random broker
        # as controller, so its admin client would wait on a stopped one).
        back = {p: [r[0], off] for p, r in plan.items()}  # each partition's second replica moves to `off`
        stopped = cluster.broker(off)
        throttled = kafka_target == "apache"
        if throttled:
            fill(others, topic)
        else:
            os.kill(stopped.pid, signal.SIGSTOP)
        try:
            path2 = plan_file(tmp_path, "back.json", topic, back)
            out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", path2, "--execute",
                                *(["--throttle", "1"] if throttled else []), bootstrap=others)
            assert "Successfully started partition reassignment" in out, out
            ongoing = wait_for("the reassignments listed", lambda: listed(cluster, tmp_path, topic, others),
                               timeout=60, until=lambda o: len(o) == PARTITIONS)
            for p, r in plan.items():
                assert ongoing[p] == (sorted(r + [off]), [off], [r[1]]), ongoing
            states = partition_states(cluster, topic, cluster.broker(rest[0]))
            for p, r in plan.items():  # Metadata: the full replica set; `off` in no ISR
                assert sorted(states[p][2]) == sorted(r + [off]) and off not in states[p][3], states
            # kafka-topics.sh --describe (DescribeTopicPartitions, then ListPartitionReassignments):
            # replicas as the target followed by the removing ones, and the adding/removing sets.
            described = described_partitions(tmp_path, topic, others)
            for p, r in plan.items():
                assert described[p] == ([r[0], off, r[1]], [off], [r[1]]), described
            # The operator's view (its rebalancer plans from it): each move at its original and
            # target, and Metadata's full replica set read from the same broker after the list.
            view = asyncio.run(ra.cluster_view(others))
            for p, r in plan.items():
                moving = view.reassigning[(topic, p)]
                assert (sorted(moving.original), moving.target) == (sorted(r), (r[0], off)), view.reassigning
                assert sorted(view.replicas[(topic, p)]) == sorted(r + [off]), view.replicas
            if not throttled:  # Kafka's ReplicaManager ReassigningPartitions, summed over the leaders
                wait_for("flotilla_reassigning_partitions summed over the leaders",
                         lambda: sum(metric(cluster.broker(n).metrics_url, "flotilla_reassigning_partitions")
                                     for n in rest), timeout=30, until=lambda n: n == PARTITIONS)
            # --preserve-throttles on Flotilla: clearing throttles calls every broker, the stopped one
            # too; on Kafka the throttle goes (else the next move onto `off` would crawl too).
            out = reassign_tool(cluster, tmp_path, "--reassignment-json-file", path2, "--cancel",
                                *([] if throttled else ["--preserve-throttles"]), bootstrap=others)
            assert "Successfully cancelled partition reassignment" in out, out
            wait_for("no reassignment left", lambda: listed(cluster, tmp_path, topic, others), timeout=60,
                     until=lambda o: o == {})
            _wait_sets(cluster, topic, plan, cluster.broker(rest[0]))
        finally:
            if not throttled:
                os.kill(stopped.pid, signal.SIGCONT)
        wait_for(f"broker {off} holding no log of {topic} after the cancel", lambda: logs_on(stopped, topic),
                 timeout=60, until=lambda names: names == [])

        # The admin client: partition 0 moves its leader's place to `off`; Kafka's refusals.
        leader0 = partition_states(cluster, topic)[0][0]
        target0 = [off] + [r for r in plan[0] if r != leader0]
        admin = kp_admin(cluster.bootstrap)
        try:
            got = admin.alter_partition_reassignments({KTP(topic, 0): target0})
            assert got == {KTP(topic, 0): None}, got
            wait_replicas(cluster, topic, {**plan, 0: target0})
            assert admin.list_partition_reassignments({topic: list(plan)}) == {}
            got = admin.alter_partition_reassignments({KTP(topic, 1): [rest[0], rest[0]], KTP(topic, 2): [off, 99],
                                                       KTP(topic, 7): [off], KTP(topic, 0): None})
            assert got == {KTP(topic, 1): InvalidReplicationAssignmentError, KTP(topic, 2): InvalidReplicationAssignmentError,
                           KTP(topic, 7): UnknownTopicOrPartitionError, KTP(topic, 0): NoReassignmentInProgressError}, got
            got = admin.alter_partition_reassignments({KTP("no-such-topic-" + topic, 0): [off]})
            assert got == {KTP("no-such-topic-" + topic, 0): UnknownTopicOrPartitionError}, got
            # The operator's moves say that they keep the replication factor (KIP-860): a target with
            # a replica more is refused with INVALID_REPLICATION_FACTOR (38) and nothing starts.
            view = asyncio.run(ra.cluster_view(cluster.bootstrap))
            assert view.reassigning == {} and len(view.replicas[(topic, 1)]) == 2, view
            refused = asyncio.run(ra.alter_reassignments(view, {(topic, 1): tuple(sorted({off, *rest}))}))
            assert list(refused) == [(topic, 1)] and refused[(topic, 1)].startswith("error 38"), refused
            assert admin.list_partition_reassignments({topic: list(plan)}) == {}
        finally:
            admin.close()
        final = {**plan, 0: target0}
        wait_for(f"the brokers holding exactly the final replicas of {topic}",
                 lambda: {b.node_id: logs_on(b, topic) for b in cluster.brokers}, timeout=60,
                 until=lambda held: all(held[n] == sorted(f"{topic}-{p}" for p, r in final.items() if n in r) for n in held))
    finally:
        writer.stop.set()
        writer.join(330)

    assert writer.unflushed == 0 and writer.failed == [], (writer.unflushed, writer.failed[:5])
    got = read_all(cluster.bootstrap, topic, PARTITIONS, expect=len(writer.acked))
    values = [v for records in got.values() for _, v in records if not v.startswith(b"fill")]
    assert len(values) == len(set(values)), "a record was read twice"
    stored = {(p, o): v for p, records in got.items() for o, v in records}
    where = {(p, v) for p, records in got.items() for _, v in records}
    # librdkafka acknowledges a batch whose request timed out without an offset (None) once a later
    # batch of the producer succeeded (its "possibly persisted" messages): those by value.
    lost = [(p, o, v) for p, o, v in writer.acked if (stored.get((p, o)) != v if o is not None else (p, v) not in where)]
    assert not lost, f"{len(lost)} acknowledged records not read back at their offsets, e.g. {lost[:5]}"


def described_partitions(tmp_path: Path, topic: str, bootstrap: str) -> dict[int, tuple]:
    """`kafka-topics.sh --describe` of the topic: partition -> (replicas, adding, removing) as printed."""
    config = tmp_path / "admin.properties"
    out = subprocess.run(kafka_tools.command("TopicCommand", "--bootstrap-server", bootstrap, "--command-config",
                                             str(config), "--describe", "--topic", topic),
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, f"kafka-topics --describe: {out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    found = {}
    for line in out.stdout.splitlines():
        part = re.search(r"\bPartition: (\d+)", line)
        if part is None:
            continue
        sets = [re.search(rf"\t{key}: ([\d,]*)", line) for key in ("Replicas", "Adding Replicas", "Removing Replicas")]
        found[int(part.group(1))] = tuple([int(x) for x in m.group(1).split(",") if x] if m else None for m in sets)
    return found


def listed(cluster: Fleet, tmp_path: Path, topic: str, bootstrap: str) -> dict[int, tuple]:
    """The topic's reassignments in progress as `kafka-reassign-partitions --list` prints them:
    partition -> (sorted replicas, adding, removing)."""
    out = reassign_tool(cluster, tmp_path, "--list", bootstrap=bootstrap)
    found = {}
    for m in re.finditer(rf"^{re.escape(topic)}-(\d+): replicas: ([\d,]+)\.(?: adding: ([\d,]+)\.)?(?: removing: ([\d,]+)\.)?",
                         out, re.M):
        ids = [[int(x) for x in (g or "").split(",") if x] for g in m.groups()[1:]]
        found[int(m.group(1))] = (sorted(ids[0]), ids[1], ids[2])
    return found


def _wait_sets(cluster: Fleet, topic: str, plan: dict[int, list[int]], via) -> None:
    """Until every partition is back on its planned replicas (in any order, as a cancel leaves them)
    with them all in the ISR."""
    wait_for(f"{topic} back on {plan}", lambda: partition_states(cluster, topic, via), timeout=90,
             until=lambda s: all(sorted(s[p][2]) == sorted(r) and sorted(s[p][3]) == sorted(r) for p, r in plan.items()))
