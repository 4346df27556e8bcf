"""The operator moves data by itself (issue 24): a KafkaCluster of three brokers grows to five and
shrinks back to three under a continuous acks=all idempotent producer.

The brokers are real processes on this host (metadata in the test API server, as pods' brokers
keep it), stood in for the StatefulSet's kwok pods: broker N runs while pod <name>-broker-N
exists, started by the test when kwok creates the pod and stopped once the pod is gone. The
operator reaches them through the flotilla.io/operator-bootstrap-servers annotation.

- 3 -> 5: once brokers 3 and 4 are registered, the operator moves replicas (throttled, a few at a
  time) until every broker holds and leads between floor and ceil of the topic's replicas and
  partitions; status.rebalance, the Rebalancing condition and RebalanceStarted/RebalanceCompleted
  events say so;
- 5 -> 3: brokers 3 and 4 are drained before the StatefulSet shrinks (a broker's pod goes only
  once that broker holds no replica) and ScaleDownBlocked never shows;
- on demand (`flotilla.io/rebalance`), paused first (`flotilla.io/rebalance-paused`): a topic placed
  by hand on two brokers is left as it is while paused, and spread once the pause is lifted;
- every acknowledged record is read exactly once, and no produce failed.

A rebalance survives a restart of the operator and of the brokers' controller mid-way: moves in
flight finish without the operator (the broker controller carries them, through its own
failover); the operator started again goes on from status.rebalance and what the cluster holds:
the same rebalance (startedAt, partitionsTotal), no move started twice, its throttles cleared at
the end, one RebalanceStarted and one RebalanceCompleted.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_rebalance.py
"""

from __future__ import annotations

import threading
import time

import pytest

from flotilla_operator.builders import rebalance_target
from tests.e2e.test_operator_recovery import running_operator
from tests.e2e.test_operator import (apply, broker_pods, condition, crds, get_json, kafkacluster,  # noqa: F401
                                     ready_at_generation)
from tests.e2e.test_replication import producer, read_all
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300),
              pytest.mark.flotilla_only("the operator drives Flotilla brokers")]

NAME = "elastic"
PARTITIONS, RF = 12, 2


@pytest.fixture
def operator(kube_env, crds):
    """An operator for one test only. (test_operator.py's is module-scoped: imported here, it kept
    running through the restart test, so two operators raced on one rebalance and the "stopped"
    operator never was: the duplicate RebalanceStarted, and a rebalance finished before it was seen
    mid-way, in the CI run of b8f9170.)"""
    with running_operator(kube_env) as runner:
        yield runner


class Brokers(BrokerCluster):
    """Brokers 0..4 of one cluster (node.id = the StatefulSet ordinal), none started yet."""

    def __init__(self, workdir, kube_env, namespace: str) -> None:
        super().__init__(workdir, kube_env, namespace, size=5, name=NAME, overrides={"replica.fetch.backoff.ms": "200"})
        for b, node in zip(self.brokers, range(5)):
            b.node_id = node

    def start_some(self, nodes) -> None:
        for n in nodes:
            self.broker(n).start()
        self.wait_formed(expect=[b.node_id for b in self.running()])


class Producer:
    """acks=all, idempotent, round-robin over the partitions, until stopped; every delivery report kept."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.p = producer(bootstrap)
        self.topic, self.acked, self.failed, self.sent = topic, [], [], 0
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _report(self, err, msg) -> None:
        (self.failed if err is not None else self.acked).append(err if err is not None else msg.value())

    def _run(self) -> None:
        while not self.stop_flag.is_set():
            self.p.produce(self.topic, partition=self.sent % PARTITIONS, value=b"r%07d" % self.sent,
                           on_delivery=self._report)
            self.sent += 1
            self.p.poll(0.01)

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(10)
        assert self.p.flush(120) == 0, "records still unacknowledged two minutes after the producer stopped"


class History:
    """The KafkaCluster and its StatefulSet's spec.replicas, sampled in the background."""

    def __init__(self, kube_env, ns: str) -> None:
        self.kube_env, self.ns, self.rows = kube_env, ns, []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_flag.is_set():
            kc = get_json(self.kube_env, "kafkacluster", NAME, "-n", self.ns, check=False) or {}
            sts = get_json(self.kube_env, "statefulset", f"{NAME}-broker", "-n", self.ns, check=False) or {}
            self.rows.append({"rebalance": (kc.get("status") or {}).get("rebalance") or {},
                              "rebalancing": condition(kc, "Rebalancing"), "blocked": condition(kc, "ScaleDownBlocked"),
                              "reconciling": condition(kc, "Reconciling"),
                              "sts": (sts.get("spec") or {}).get("replicas")})
            time.sleep(0.3)

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(10)


def placement(cluster: Brokers, topic: str) -> tuple[dict[int, int], dict[int, int]]:
    """(replicas held, partitions led) per broker 0..4, from Metadata."""
    md = cluster.metadata(cluster.broker(0), [topic])
    held = {b: 0 for b in range(5)}
    led = {b: 0 for b in range(5)}
    for p in md.topics[0].partitions:
        for r in p.replica_nodes:
            held[int(r)] += 1
        led[int(p.leader_id)] += 1
    return held, led


def holds_nothing(cluster: Brokers, node: int) -> list[str]:
    """The partitions (of every topic) that still have a replica on `node`."""
    md = cluster.metadata(cluster.broker(0), None)
    return [f"{t.name}-{int(p.partition_index)}" for t in md.topics for p in t.partitions
            if node in {int(r) for r in p.replica_nodes}]


def create_skewed(bootstrap: str) -> str:
    """A topic of 6 partitions RF=2 placed by hand on brokers 0 and 1 (kafka-topics --replica-assignment)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    name = kafka_wire.unique_topic("skewed")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    plan = [[0, 1], [1, 0]] * 3
    admin.create_topics([NewTopic(name, num_partitions=len(plan), replication_factor=-1, replica_assignment=plan)])[name].result(30)
    return name


def annotate(kube_env, ns: str, *annotations: str) -> None:
    kube_env.kubectl("annotate", "kafkacluster", NAME, "-n", ns, "--overwrite", *annotations)


def events(kube_env, ns: str) -> list[dict]:
    got = get_json(kube_env, "events", "-n", ns, "--field-selector", f"involvedObject.name={NAME}")
    return got["items"]


def pod_exists(kube_env, ns: str, node: int) -> bool:
    return any(p["metadata"]["name"] == f"{NAME}-broker-{node}" for p in broker_pods(kube_env, ns, NAME))


def test_scale_up_spreads_and_scale_down_drains_under_a_producer(kube_env, kube_namespace, operator, tmp_path):
    ns = kube_namespace
    cluster = Brokers(tmp_path, kube_env, ns)
    try:
        cluster.start_some([0, 1, 2])
        kc = kafkacluster(NAME, ns, replicas=3,
                          rebalance={"throttleBytesPerSecond": 4 * 1024 * 1024, "maxPartitionMovesInFlight": 3})
        kc["metadata"]["annotations"] = {"flotilla.io/operator-bootstrap-servers":
                                         ",".join(b.bootstrap for b in cluster.brokers)}
        apply(kube_env, kc)
        wait_for("3 brokers Ready", ready_at_generation(kube_env, ns, NAME, 3), timeout=120)
        wait_for("the first fleet adopted", lambda: (get_json(kube_env, "kafkacluster", NAME, "-n", ns).get("status") or {})
                 .get("rebalance"), until=lambda r: bool(r) and r.get("completedBrokers") == [0, 1, 2], timeout=60)

        topic = kafka_wire.unique_topic("elastic")
        with kafka_wire.connect(cluster.broker(0).bootstrap) as conn:
            assert int(conn.create_topic(topic, PARTITIONS, replication_factor=RF)) == 0
        cluster.wait_leaders(topic, PARTITIONS)
        held, _ = placement(cluster, topic)
        assert held[3] == held[4] == 0
        history = History(kube_env, ns)
        writer = Producer(cluster.bootstrap, topic)
        try:
            wait_for("records acknowledged", lambda: len(writer.acked) >= 200, timeout=60)

            # 3 -> 5: kwok makes the pods, the test runs their brokers.
            kube_env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 5}}')
            wait_for("pods of brokers 3 and 4", lambda: pod_exists(kube_env, ns, 3) and pod_exists(kube_env, ns, 4),
                     timeout=60)
            cluster.start_some([3, 4])
            wait_for("the scale-up rebalance completed", lambda: get_json(kube_env, "kafkacluster", NAME, "-n", ns)
                     ["status"].get("rebalance"), until=lambda r: bool(r) and r.get("phase") == "Idle"
                     and r.get("completedBrokers") == [0, 1, 2, 3, 4], timeout=120)
            # Replicas and preferred leaders are spread: 24 replicas and 12 leaders over 5 brokers.
            held, led = wait_for("replicas and leaders within floor..ceil", lambda: placement(cluster, topic),
                                 until=lambda hl: all(4 <= n <= 5 for n in hl[0].values())
                                 and all(2 <= n <= 3 for n in hl[1].values()), timeout=30)
            up = [r for r in history.rows if r["rebalance"].get("reason") == "ScaleUp"]
            assert any(r["rebalance"].get("phase") == "Moving" and r["rebalancing"].get("status") == "True"
                       and r["rebalancing"].get("reason") == "ScaleUp" for r in up), history.rows[-20:]
            done = get_json(kube_env, "kafkacluster", NAME, "-n", ns)
            rebalance = done["status"]["rebalance"]
            assert rebalance["partitionsMoved"] == rebalance["partitionsTotal"] > 0, rebalance
            assert rebalance["brokers"] == [0, 1, 2, 3, 4] and "startedAt" in rebalance
            assert rebalance.get("bytesToMove", 0) > 0, rebalance  # DescribeLogDirs sizes of what was copied
            assert "throttledTopics" not in rebalance, rebalance  # the throttles are gone
            assert (condition(done, "Rebalancing")["status"], condition(done, "Rebalancing")["reason"]) == ("False", "Idle")
            reasons = [e["reason"] for e in events(kube_env, ns)]
            assert "RebalanceStarted" in reasons and "RebalanceCompleted" in reasons, reasons

            # 5 -> 3: brokers 3 and 4 are emptied first; each pod goes only once its broker holds nothing.
            kube_env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 3}}')
            for node in (4, 3):
                wait_for(f"pod {NAME}-broker-{node} gone", lambda: not pod_exists(kube_env, ns, node), timeout=120)
                assert holds_nothing(cluster, node) == [], f"broker {node}'s pod went while it held replicas"
                cluster.broker(node).stop()
            wait_for("3 brokers Ready", ready_at_generation(kube_env, ns, NAME, 3), timeout=120)
            down = [r for r in history.rows if r["rebalance"].get("reason") == "ScaleDown"]
            assert any(r["rebalance"].get("phase") == "Moving" and r["sts"] == 5
                       and r["reconciling"].get("reason") == "Draining" for r in down), history.rows[-20:]
            assert not any(r["blocked"] for r in history.rows), [r for r in history.rows if r["blocked"]][:3]
            # The drain's last step (preferred leaders, throttles off, Idle) is the rebalancer's next
            # turn, which can come after the shrunk StatefulSet is Ready (under load it did).
            final = wait_for("the scale-down rebalance Idle", lambda: get_json(kube_env, "kafkacluster", NAME, "-n", ns)
                             ["status"]["rebalance"], until=lambda r: r.get("phase") != "Moving", timeout=60)
            assert (final["phase"], final["reason"], final["completedBrokers"]) == ("Idle", "ScaleDown", [0, 1, 2])
            held, _ = placement(cluster, topic)
            assert held[3] == held[4] == 0 and all(8 == held[b] for b in range(3)), held

            # On demand, paused first: a topic placed by hand on brokers 0 and 1 only.
            skewed = create_skewed(cluster.bootstrap)
            annotate(kube_env, ns, "flotilla.io/rebalance-paused=true", "flotilla.io/rebalance=once")
            paused = wait_for("a requested rebalance, paused", lambda: get_json(kube_env, "kafkacluster", NAME, "-n", ns)
                              ["status"].get("rebalance"), until=lambda r: bool(r) and r.get("phase") == "Paused"
                              and r.get("reason") == "Requested", timeout=60)
            assert paused["token"] == "once" and "paused" in paused["message"], paused
            assert placement(cluster, skewed)[0] == {0: 6, 1: 6, 2: 0, 3: 0, 4: 0}  # nothing started
            annotate(kube_env, ns, "flotilla.io/rebalance-paused-")
            wait_for("the requested rebalance completed", lambda: get_json(kube_env, "kafkacluster", NAME, "-n", ns)
                     ["status"].get("rebalance"), until=lambda r: bool(r) and r.get("phase") == "Idle"
                     and r.get("reason") == "Requested", timeout=60)
            wait_for("the hand-placed topic spread", lambda: placement(cluster, skewed),
                     until=lambda hl: hl[0] == {0: 4, 1: 4, 2: 4, 3: 0, 4: 0} and set(hl[1].values()) == {2, 0},
                     timeout=30)
        finally:
            writer.stop()
            history.stop()
        assert writer.failed == [], writer.failed[:5]
        got = read_all(cluster.bootstrap, topic, PARTITIONS, len(writer.acked))
        values = [v for recs in got.values() for _, v in recs]
        assert len(values) == len(set(values)), "a record was read twice"
        assert sorted(values) == sorted(writer.acked), (len(values), len(writer.acked))
    finally:
        cluster.close()
        kube_env.kubectl("delete", "kafkacluster", NAME, "-n", ns, "--wait=false", check=False)


THROTTLE_KEYS = {"broker": ("leader.replication.throttled.rate", "follower.replication.throttled.rate"),
                 "topic": ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")}


def in_flight(bootstrap: str, topic: str) -> dict[int, tuple[int, ...]]:
    """partition -> target replicas of `topic`'s reassignments in flight (kafka-python's
    ListPartitionReassignments; its replicas are the target's then those being removed)."""
    from tests.e2e.test_reassignment import kp_admin

    admin = kp_admin(bootstrap)
    try:
        moving = admin.list_partition_reassignments()
    finally:
        admin.close()
    return {tp.partition: tuple(b for b in r["replicas"] if b not in r["removing_replicas"])
            for tp, r in moving.items() if tp.topic == topic}


def throttles_set(bootstrap: str, topic: str, brokers) -> dict[str, dict[str, str]]:
    """The replication throttles DescribeConfigs shows set (not defaults), per broker and on the topic."""
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    found = {}
    for kind, name in [("broker", str(b)) for b in brokers] + [("topic", topic)]:
        res = ConfigResource(ResourceType.BROKER if kind == "broker" else ResourceType.TOPIC, name)
        entries = admin.describe_configs([res], request_timeout=15)[res].result(30)
        set_ = {k: entries[k].value for k in THROTTLE_KEYS[kind] if k in entries and entries[k].value
                and ConfigSource(entries[k].source).name.startswith("DYNAMIC")}
        if set_:
            found[f"{kind} {name}"] = set_
    return found


class MoveLog:
    """Every (partition, target) seen in flight, with the samples it was seen at, in the background:
    a move started twice shows as two separate runs of samples."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic, self.samples, self.errors = bootstrap, topic, [], []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_flag.is_set():
            try:
                self.samples.append(in_flight(self.bootstrap, self.topic))
            except Exception as exc:  # a broker restarting: the sample is skipped
                self.errors.append(repr(exc))
            time.sleep(0.2)

    def started_twice(self) -> dict[tuple[int, tuple[int, ...]], int]:
        runs: dict[tuple[int, tuple[int, ...]], int] = {}
        before: set = set()
        for sample in self.samples:
            now = set(sample.items())
            for move in now - before:
                runs[move] = runs.get(move, 0) + 1
            before = now
        return {m: n for m, n in runs.items() if n > 1}

    def stop(self) -> None:
        self.stop_flag.set()
        self.thread.join(10)


def test_a_rebalance_survives_an_operator_and_a_controller_restart(kube_env, kube_namespace, crds, tmp_path):
    ns = kube_namespace
    parts = 6
    cluster = Brokers(tmp_path, kube_env, ns)
    log = None
    try:
        cluster.start_some([0, 1, 2])
        kc = kafkacluster(NAME, ns, replicas=3,
                          rebalance={"throttleBytesPerSecond": 256 * 1024, "maxPartitionMovesInFlight": 1})
        kc["metadata"]["annotations"] = {"flotilla.io/operator-bootstrap-servers":
                                         ",".join(b.bootstrap for b in cluster.brokers)}
        topic = kafka_wire.unique_topic("restart")
        with running_operator(kube_env):
            apply(kube_env, kc)
            wait_for("3 brokers Ready", ready_at_generation(kube_env, ns, NAME, 3), timeout=120)
            wait_for("the first fleet adopted", lambda: (get_json(kube_env, "kafkacluster", NAME, "-n", ns).get("status")
                     or {}).get("rebalance"), until=lambda r: bool(r) and r.get("completedBrokers") == [0, 1, 2], timeout=60)
            with kafka_wire.connect(cluster.broker(0).bootstrap) as conn:
                assert int(conn.create_topic(topic, parts, replication_factor=RF)) == 0
            cluster.wait_leaders(topic, parts)
            p = producer(cluster.bootstrap)  # ~1.5 MiB a partition: a copy takes seconds at 256 KiB/s
            for i in range(24 * parts):
                p.produce(topic, partition=i % parts, value=b"x" * 65536)
                p.poll(0)
            assert p.flush(60) == 0, "the fill records were not all acknowledged"

            kube_env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 5}}')
            wait_for("pods of brokers 3 and 4", lambda: pod_exists(kube_env, ns, 3) and pod_exists(kube_env, ns, 4),
                     timeout=60)
            cluster.start_some([3, 4])
            log = MoveLog(cluster.bootstrap, topic)
            mid, first = wait_for("the rebalance mid-way, moves in flight", lambda: (
                get_json(kube_env, "kafkacluster", NAME, "-n", ns)["status"].get("rebalance") or {},
                in_flight(cluster.bootstrap, topic)),
                until=lambda rm: rm[0].get("phase") == "Moving" and rm[0].get("partitionsMoved", 0)
                < rm[0].get("partitionsTotal", 0) and rm[1], timeout=60)
        # The operator is stopped: what was in flight finishes without it.
        started = [e["reason"] for e in events(kube_env, ns)].count("RebalanceStarted")
        moving = {**first, **in_flight(cluster.bootstrap, topic)}
        stopped_at = get_json(kube_env, "kafkacluster", NAME, "-n", ns)["status"]["rebalance"]
        assert (stopped_at["startedAt"], stopped_at["reason"]) == (mid["startedAt"], "ScaleUp"), stopped_at

        # The brokers' controller (the broker holding the metadata Lease) is killed and comes back.
        controller = cluster.controller_id()
        cluster.broker(controller).kill9()
        cluster.broker(controller).start()
        cluster.wait_formed(expect=[0, 1, 2, 3, 4])
        wait_for("the moves in flight finished without the operator", lambda: (
            in_flight(cluster.bootstrap, topic), cluster.metadata(cluster.broker(0), [topic]).topics[0].partitions),
            until=lambda fm: not fm[0] and all(tuple(int(r) for r in pm.replica_nodes) == moving[int(pm.partition_index)]
                                               for pm in fm[1] if int(pm.partition_index) in moving), timeout=90)
        still = get_json(kube_env, "kafkacluster", NAME, "-n", ns)["status"]["rebalance"]
        assert still["phase"] == "Moving" and still["partitionsMoved"] < still["partitionsTotal"], still
        # Moves were left for the operator started again to start (one in flight at a time).
        assert still["partitionsTotal"] - still["partitionsMoved"] > len(moving), (still, moving)

        with running_operator(kube_env):
            done = wait_for("the rebalance completed after the restart", lambda: get_json(
                kube_env, "kafkacluster", NAME, "-n", ns)["status"].get("rebalance"),
                until=lambda r: bool(r) and r.get("phase") == "Idle" and r.get("completedBrokers") == [0, 1, 2, 3, 4],
                timeout=90)
        log.stop()
        assert (done["startedAt"], done["reason"]) == (mid["startedAt"], "ScaleUp"), done
        assert done["partitionsMoved"] == done["partitionsTotal"] == mid["partitionsTotal"], (mid, done)
        assert "throttledTopics" not in done and "throttledBrokers" not in done, done
        assert log.samples and log.started_twice() == {}, log.started_twice()
        assert throttles_set(cluster.bootstrap, topic, range(5)) == {}
        # Both operators headed for the plan the first one made and kept.
        kept = rebalance_target.decode(get_json(kube_env, "configmap", rebalance_target.configmap_name(NAME), "-n", ns))
        assert kept is not None and kept.belongs_to(done), (kept, done)
        held = {int(pm.partition_index): tuple(int(r) for r in pm.replica_nodes)
                for pm in cluster.metadata(cluster.broker(0), [topic]).topics[0].partitions}
        assert held == {i: kept.replicas[(topic, i)] for i in range(parts)}, (held, kept.replicas)
        # 12 replicas and 6 leaders over 5 brokers.
        wait_for("replicas and leaders within floor..ceil", lambda: placement(cluster, topic),
                 until=lambda hl: all(2 <= n <= 3 for n in hl[0].values()) and all(1 <= n <= 2 for n in hl[1].values()),
                 timeout=30)
        # One start, announced by the first operator; the restarted one announces one completion.
        reasons = [e["reason"] for e in events(kube_env, ns)]
        assert reasons.count("RebalanceStarted") == started == 1, reasons
        assert reasons.count("RebalanceCompleted") == 1, reasons
    finally:
        if log is not None:
            log.stop()
        cluster.close()
        kube_env.kubectl("delete", "kafkacluster", NAME, "-n", ns, "--wait=false", check=False)
