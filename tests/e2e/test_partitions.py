"""Network partitions of a three-broker fleet (issue 35), made by the nemesis on loopback
(flotilla/testenv/nemesis.py): each broker runs in a cgroup of its own, and packet filters cut
it from a peer, from the API server, or drop only what the API server answers it.

The asymmetric ISR expansion that lost acknowledged acks=all records before the fix:
1. A topic with replicas [L, F2, F1], min.insync.replicas=2, an idempotent acks=all producer.
   F2 is cut from L until L shrinks the ISR to [L, F1].
2. Only the API server's answers to L are dropped, and F2 -> L heals. F2 catches up; L writes
   ISR [L, F2, F1]; the API server commits it, but L never hears back.
3. F2 is cut from L again. L's Lease lapses and the controller elects F2 from the stored ISR.
Before the fix L took the unanswered write for a rejected one, went on acknowledging with
[L, F1], and truncated those records when it came back under F2 (thousands lost). Now L keeps
F2 in its maximal ISR until the record shows the outcome: nothing it acknowledges is missing
from F2, and the final log holds every acknowledged record at its offset.

    pytest -m kube tests/e2e/test_partitions.py
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from urllib.parse import urlsplit

import pytest
import yaml

from broker.metadata import kube_objects as ko
from flotilla.testenv import nemesis as nemesis_mod
from flotilla.testenv.nemesis import Nemesis
from tests.e2e.test_replication import metric
from tests.support import kafka_wire
from tests.support.cluster import BrokerCluster
from tests.support.waiting import wait_for

confluent_kafka = pytest.importorskip("confluent_kafka")

pytestmark = [
    pytest.mark.kube,
    pytest.mark.timeout(420),
    pytest.mark.flotilla_only("Leases, ISR writes and network cuts of a Flotilla fleet"),
    pytest.mark.skipif(nemesis_mod.available() is not None, reason=f"nemesis: {nemesis_mod.available()}"),
]

OVERRIDES = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.backoff.ms": "200",
    # Long enough for F2 to catch up and L's expansion to land before L's Lease lapses (step 2).
    "flotilla.metadata.lease.duration.ms": "12000",
}


def api_port(kubeconfig) -> int:
    config = yaml.safe_load(open(kubeconfig))
    return urlsplit(config["clusters"][0]["cluster"]["server"]).port or 443


@pytest.fixture
def fleet(tmp_path, kube_env, kube_namespace):
    """Three brokers, each in a nemesis node of its own; the API server is a node too."""
    with Nemesis() as nemesis:
        cluster = BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES)
        cluster.nemesis = nemesis
        cluster.api = nemesis.add_server("api", api_port(kube_env.kubeconfig))
        cluster.nodes = {}
        for b in cluster.brokers:
            node = nemesis.add_node(f"broker-{b.node_id}", [b.port, b.metrics_port])
            b.launch_prefix = nemesis.launch_prefix(node)
            cluster.nodes[b.node_id] = node
        with cluster:
            yield cluster


class AcksAllProducer:
    """An idempotent acks=all producer writing numbered records to partition 0 in a thread,
    remembering the offset each acknowledged record got."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.acked: dict[int, bytes] = {}  # offset -> value
        self.errors: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._producer = confluent_kafka.Producer({
            "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 10000,
            "retry.backoff.ms": 100, "error_cb": lambda e: self.errors.append(str(e)),
        })
        self._thread = threading.Thread(target=self._run, name="acks-all-producer", daemon=True)
        self._thread.start()

    def _delivered(self, err, msg) -> None:
        if err is None:
            self.acked[msg.offset()] = msg.value()
        else:
            self.errors.append(str(err))

    def _run(self) -> None:
        while not self._stop.is_set() and self.sent < 500_000:
            for _ in range(20):  # about 2,000 records a second
                try:
                    self._producer.produce(self.topic, b"%d" % self.sent, partition=0, on_delivery=self._delivered)
                    self.sent += 1
                except BufferError:
                    break
            self._producer.poll(0.01)

    def acked_count(self) -> int:
        return len(self.acked)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._producer.flush(90)


def kafkatopic_state(cluster, topic: str) -> tuple[int, list[int]]:
    """(leader, ISR) of partition 0 as the KafkaTopic holds it (the store, not any broker's view)."""
    name = ko.topic_object_name(cluster.name, topic)
    obj = json.loads(cluster.kube_env.kubectl("get", "kafkatopic", name, "-n", cluster.namespace,
                                              "-o", "json").stdout)
    p = obj["status"]["assignment"][0]
    return int(p["leader"]), [int(r) for r in p["isr"]]


def read_partition(bootstrap: str, topic: str) -> dict[int, bytes]:
    """Every record of partition 0, offset -> value, read from the leader up to its high watermark."""
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}",
                                         "enable.auto.commit": False, "isolation.level": "read_uncommitted"})
    try:
        tp = confluent_kafka.TopicPartition(topic, 0, 0)
        _, high = consumer.get_watermark_offsets(tp, timeout=30)
        consumer.assign([tp])
        out: dict[int, bytes] = {}
        deadline = time.monotonic() + 120
        while len(out) < high and time.monotonic() < deadline:
            for m in consumer.consume(1000, timeout=1.0):
                if m.error() is None:
                    out[m.offset()] = m.value()
        return out
    finally:
        consumer.close()


def test_an_unanswered_isr_expansion_loses_no_acknowledged_record(fleet):
    cluster, nemesis = fleet, fleet.nemesis
    controller = cluster.controller_id()
    leader, f2, f1 = sorted((b.node_id for b in cluster.brokers), key=lambda n: n == controller)
    L, F2 = cluster.nodes[leader], cluster.nodes[f2]
    topic = kafka_wire.unique_topic("isrloss")
    with kafka_wire.connect(cluster.broker(controller).bootstrap) as conn:
        code = conn.create_topic(topic, configs={"min.insync.replicas": "2"}, assignment=[[leader, f2, f1]])
    assert int(code) == 0, code
    wait_for(f"{topic}: leader {leader}, ISR [{leader}, {f2}, {f1}]", lambda: kafkatopic_state(cluster, topic),
             until=lambda s: s == (leader, [leader, f2, f1]), timeout=60)
    producer = AcksAllProducer(",".join(b.bootstrap for b in cluster.brokers), topic)
    try:
        wait_for("records acknowledged", producer.acked_count, until=lambda n: n > 500, timeout=60)

        # 1. F2 cut from L (refused at once, so that it reconnects at once after the heal).
        nemesis.cut(F2, L, reset=True)
        wait_for(f"leader {leader} shrinking the ISR to [{leader}, {f1}]", lambda: kafkatopic_state(cluster, topic),
                 until=lambda s: s == (leader, [leader, f1]), timeout=60)

        # 2. The API server's answers to L dropped; F2 back to L: L's expansion is committed unanswered.
        nemesis.drop_answers(L, cluster.api)
        nemesis.restore(F2, L)
        wait_for(f"the stored ISR of {topic} expanded to [{leader}, {f2}, {f1}] by {leader}",
                 lambda: kafkatopic_state(cluster, topic), until=lambda s: s == (leader, [leader, f2, f1]), timeout=30)
        acked_at_expansion = producer.acked_count()

        # 3. F2 cut from L again: L's Lease lapses and the controller elects F2 from the stored ISR.
        nemesis.cut(F2, L)
        new_leader, _ = wait_for(f"a leader other than {leader} elected for {topic}",
                                 lambda: kafkatopic_state(cluster, topic), until=lambda s: s[0] not in (leader, -1),
                                 timeout=90)
        assert new_leader == f2, f"the controller elected {new_leader}, not {f2}: the scenario did not happen"
        acked_until_election = producer.acked_count()

        # Heal: L comes back as F2's follower (truncating what F2 does not have) and rejoins.
        nemesis.heal()
        wait_for(f"all three brokers back in the ISR of {topic}", lambda: kafkatopic_state(cluster, topic),
                 until=lambda s: sorted(s[1]) == sorted([leader, f1, f2]), timeout=120)
        target = producer.acked_count() + 500
        wait_for("records acknowledged after the heal", producer.acked_count, until=lambda n: n > target, timeout=90)
    finally:
        producer.stop()

    final = read_partition(cluster.broker(f2).bootstrap, topic)
    lost = {o: v for o, v in producer.acked.items() if final.get(o) != v}
    assert not lost, (
        f"{len(lost)} of {len(producer.acked)} acknowledged records are not in the final log at their offsets "
        f"(first: {sorted(lost.items())[:5]}); acknowledged {acked_until_election - acked_at_expansion} between "
        f"the expansion and the election; producer errors: {producer.errors[:5]}")
    values = list(final.values())
    assert len(values) == len(set(values)), "a record is in the log twice (the producer is idempotent)"
    # The scenario reached the unknown outcome, and L kept its maximal ISR through it.
    assert metric(cluster.broker(leader), "flotilla_isr_writes_unknown_outcome_total") >= 1
