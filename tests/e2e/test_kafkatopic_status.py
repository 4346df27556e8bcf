"""A KafkaTopic's status (topic id, assignment: the brokers' record of the topic) survives users'
writes of the resource (issue 18, item 1): three broker processes, an RF=3 topic written with
acks=all, and `kubectl replace` of its KafkaTopic from a manifest holding spec and labels only (the
GitOps path: a manifest from Git, Argo CD's Replace=true, a `kubectl edit` dropping status), while
a producer keeps writing. Nothing may be lost: every acknowledged record is read back, every
broker's partition directories are the same directories holding the same topic id, the topic id
and the leader epochs stand. Run with the CRD of crds/ (status subresource, CEL rules) and with a
CRD of an older version that has neither (the brokers' own defence, kube_store._kept).

    pytest -m kube tests/e2e/test_kafkatopic_status.py
"""

from __future__ import annotations

import copy
import json
import threading
from pathlib import Path

import pytest
import yaml

from broker.metadata import kube_objects as ko
from broker.replica import partition_metadata
from tests.e2e.test_replication import OVERRIDES, create_topic, partition_states, producer, read_all
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import CRD_DIR, BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.timeout(300),
    pytest.mark.flotilla_only("KafkaTopic resources of a Flotilla fleet"),
]

PARTITIONS = 3
TOPIC_CRD = CRD_DIR / "flotilla.io_kafkatopics.yaml"


def older_crd() -> dict:
    """The KafkaTopic CRD as it was before the status subresource and the rules on status (a
    cluster upgraded with `helm upgrade`, which leaves CRDs as they were)."""
    crd = yaml.safe_load(TOPIC_CRD.read_text())
    version = crd["spec"]["versions"][0]
    version.pop("subresources", None)
    root = version["schema"]["openAPIV3Schema"]
    root["x-kubernetes-validations"] = [r for r in root["x-kubernetes-validations"]
                                        if not r.get("fieldPath", "").startswith(".status")]
    return crd


@pytest.fixture(params=["crd", "older-crd"])
def fleet(request, tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        if request.param == "older-crd":
            kube_env.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(older_crd()))
            kube_env.kubectl("wait", "--for=condition=Established", "crd/kafkatopics.flotilla.io", "--timeout=60s")
        try:
            yield c
        finally:
            if request.param == "older-crd":  # the next tests get the CRD of crds/ again
                kube_env.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(TOPIC_CRD))


def kafkatopic(kube_env, ns: str, name: str) -> dict:
    return json.loads(kube_env.kubectl("get", "kafkatopic", name, "-n", ns, "-o", "json").stdout)


def directories(fleet: BrokerCluster, topic: str) -> dict[tuple[int, int], tuple[int, object]]:
    """(broker, partition) -> (inode of the partition directory, topic id in its partition.metadata)."""
    out = {}
    for b in fleet.brokers:
        for p in range(PARTITIONS):
            d = Path(b.log_dirs) / f"{topic}-{p}"
            out[(b.node_id, p)] = (d.stat().st_ino, partition_metadata.read(d))
    return out


def seen_by_every_broker(fleet: BrokerCluster, marker: str) -> None:
    """Events of one kind reach a broker in order: once every broker lists a topic created after a
    write, every broker has applied that write."""
    with kafka_wire.connect(fleet.brokers[0].bootstrap) as conn:
        assert int(conn.create_topic(marker, 1, replication_factor=1)) == 0
    for b in fleet.brokers:
        fleet.wait_leaders(marker, 1, via=b)


def replace_retrying_conflicts(kube_env, ns: str, manifest: dict, attempts: int = 20) -> None:
    """`kubectl replace` of a manifest without resourceVersion reads the current one and sends it
    back; a broker writing the resource in between makes it a Conflict, which a user or a GitOps
    tool simply retries. Every other error fails the test."""
    for _ in range(attempts):
        proc = kube_env.kubectl("replace", "-n", ns, "-f", "-", input=json.dumps(manifest), check=False)
        if proc.returncode == 0:
            return
        assert "Conflict" in proc.stderr, proc.stderr
    raise AssertionError(f"kubectl replace conflicted {attempts} times in a row: {proc.stderr}")


def test_kubectl_replace_without_status_under_load_loses_nothing(fleet, kube_env, kube_namespace):
    ns = kube_namespace
    topic = create_topic(fleet.brokers[0], PARTITIONS, rf=3, configs={"min.insync.replicas": "2"})
    fleet.wait_leaders(topic, PARTITIONS)
    wait_for("full ISRs", lambda: all(len(s[3]) == 3 for s in partition_states(fleet, topic).values()), timeout=60)
    name = ko.topic_object_name(fleet.name, topic)
    before = kafkatopic(kube_env, ns, name)
    topic_id = before["status"]["topicId"]
    epochs = {p: s[1] for p, s in partition_states(fleet, topic).items()}

    acked: list[bytes] = []
    failed: list[str] = []
    lock = threading.Lock()

    def report(err, msg):
        with lock:
            (failed.append(str(err)) if err is not None else acked.append(msg.value()))

    p = producer(fleet.bootstrap)
    for i in range(3000):
        p.produce(topic, partition=i % PARTITIONS, value=f"a{i}".encode(), on_delivery=report)
        if i % 500 == 0:
            p.poll(0)
    assert p.flush(60) == 0 and len(acked) == 3000, failed[:3]
    dirs = directories(fleet, topic)
    assert {tid for _, tid in dirs.values()} == {ko.parse_topic_id(topic_id)}

    stop = threading.Event()

    def keep_writing():
        i = 0
        while not stop.is_set():
            p.produce(topic, partition=i % PARTITIONS, value=f"b{i}".encode(), on_delivery=report)
            p.poll(0.005)
            i += 1

    writer = threading.Thread(target=keep_writing, name="producer")
    writer.start()
    try:
        # The manifest a user keeps in Git: spec and labels, no status, no resourceVersion.
        manifest = {"apiVersion": before["apiVersion"], "kind": before["kind"],
                    "metadata": {"name": name, "labels": before["metadata"]["labels"]},
                    "spec": copy.deepcopy(before["spec"])}
        for _ in range(3):
            replace_retrying_conflicts(kube_env, ns, manifest)
        seen_by_every_broker(fleet, kafka_wire.unique_topic("marker"))
        wait_for("more acks=all records after the replace",
                 lambda: sum(1 for v in list(acked) if v.startswith(b"b")) >= 300, timeout=60)
    finally:
        stop.set()
        writer.join()
    assert p.flush(60) == 0, "records still unacknowledged"
    assert not failed, failed[:3]

    # The brokers' record stands (or was written back): the same id, an assignment, epochs not reset.
    after = wait_for("status with the topic id", lambda: (lambda o: o if (o.get("status") or {}).get("topicId")
                     and (o.get("status") or {}).get("assignment") else None)(kafkatopic(kube_env, ns, name)), timeout=30)
    assert after["status"]["topicId"] == topic_id
    md = fleet.metadata(fleet.brokers[1], [topic])
    assert ko.topic_id_text(md.topics[0].topic_id) == topic_id
    assert all(s[1] >= epochs[p] for p, s in partition_states(fleet, topic).items()), (epochs, partition_states(fleet, topic))
    # Every broker kept its directories (not removed and made again) and their topic id.
    assert directories(fleet, topic) == dirs
    # Every acknowledged record is there, once.
    got = read_all(fleet.bootstrap, topic, PARTITIONS, len(acked))
    values = sorted(v for recs in got.values() for _, v in recs)
    assert values == sorted(acked), (len(values), len(acked))
