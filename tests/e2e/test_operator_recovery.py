"""Recovery traps of the operator (issue 18, item 9) against a real control plane (kube-apiserver,
etcd, controller-manager, scheduler, kwok), the operator run in-process with kopf's KopfRunner.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_recovery.py

Covers: a deleted and re-created KafkaCluster renders the cluster.id its brokers' volumes hold (a
record that outlives the resource), and spec.clusterId pins it and is immutable; a StatefulSet made
with OrderedReady by an earlier operator is replaced by a Parallel one without restarting a pod;
a configuration roll does not start while a partition's ISR is short, and finishes once it is full.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from typing import Iterator

import pytest
from tests.support.kopf_operator import in_process_operator
from tests.e2e.test_operator import write_topic
from flotilla.testenv.brokers.crds import install_crds
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.kube

IMAGE = os.environ.get("FLOTILLA_IMAGE", "flotilla:never-pulled")  # kwok never pulls it
SELECTOR = "app.kubernetes.io/name=flotilla,app.kubernetes.io/component=broker"


def get_json(kube_env, *args: str) -> dict | None:
    proc = kube_env.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else None


def kafkacluster(name: str, namespace: str, **spec) -> dict:
    spec.setdefault("storage", {"type": "ephemeral", "size": "1Gi"})  # kwok has no volumes
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def apply(kube_env, obj: dict, check: bool = True):
    return kube_env.kubectl("apply", "-f", "-", input=json.dumps(obj), check=check)


def condition(obj: dict | None, type_: str) -> dict:
    return next((c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), {})


def ready(kube_env, ns: str, name: str, replicas: int = 3):
    def check():
        kc = get_json(kube_env, "kafkacluster", name, "-n", ns)
        st = (kc or {}).get("status") or {}
        ok = (condition(kc, "Ready").get("status") == "True" and st.get("readyReplicas") == replicas
              and st.get("observedGeneration") == kc["metadata"]["generation"])
        return kc if ok else None
    return check


def broker_pods(kube_env, ns: str, name: str) -> dict[str, dict]:
    items = get_json(kube_env, "pods", "-n", ns, "-l", f"{SELECTOR},app.kubernetes.io/instance={name}")["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def rendered_cluster_id(kube_env, ns: str, name: str) -> str | None:
    cm = get_json(kube_env, "configmap", f"{name}-config", "-n", ns)
    props = (cm or {}).get("data", {}).get("server.properties", "")
    return next((line.split("=", 1)[1] for line in props.splitlines() if line.startswith("cluster.id=")), None)


@contextlib.contextmanager
def running_operator(kube_env) -> Iterator[object]:
    with in_process_operator({"KUBECONFIG": str(kube_env.kubeconfig), "FLOTILLA_OPERATOR_RESYNC_SECONDS": "3",
                              "FLOTILLA_OPERATOR_METRICS_ADDRESS": "127.0.0.1:0",
                              "FLOTILLA_BROKER_IMAGE": IMAGE}) as runner:
        yield runner


@pytest.fixture(scope="module")
def crds(kube_env):
    install_crds(kube_env)


@pytest.fixture
def operator(kube_env, crds):
    with running_operator(kube_env) as runner:
        yield runner


# ---------------------------------------------------------------------------------------------


def test_a_recreated_kafkacluster_renders_the_same_cluster_id(kube_env, kube_namespace, operator):
    ns, name = kube_namespace, "again"
    apply(kube_env, kafkacluster(name, ns, replicas=3))
    kc = wait_for("KafkaCluster Ready", ready(kube_env, ns, name), timeout=120)
    first_uid, cluster_id = kc["metadata"]["uid"], kc["status"]["clusterId"]
    assert rendered_cluster_id(kube_env, ns, name) == cluster_id
    record = get_json(kube_env, "configmap", f"{name}-cluster-id", "-n", ns)
    assert record["data"] == {"cluster.id": cluster_id} and record["immutable"] is True
    assert not record["metadata"].get("ownerReferences")
    # The record cannot be edited, only deleted.
    edit = kube_env.kubectl("patch", "configmap", f"{name}-cluster-id", "-n", ns, "--type=merge",
                            "-p", '{"data": {"cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"}}', check=False)
    assert edit.returncode != 0 and "immutable" in edit.stderr, edit.stderr

    # Deleted (an accidental delete, a GitOps re-sync) and garbage-collected; the volumes would stay.
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns, "--wait=true", "--timeout=60s")
    wait_for("children garbage-collected", lambda: get_json(kube_env, "configmap", f"{name}-config", "-n", ns) is None
             and get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns) is None, timeout=90)
    assert get_json(kube_env, "configmap", f"{name}-cluster-id", "-n", ns)["data"]["cluster.id"] == cluster_id

    apply(kube_env, kafkacluster(name, ns, replicas=3))
    kc = wait_for("re-created KafkaCluster Ready", ready(kube_env, ns, name), timeout=120)
    assert kc["metadata"]["uid"] != first_uid
    assert kc["status"]["clusterId"] == cluster_id
    assert rendered_cluster_id(kube_env, ns, name) == cluster_id
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns, "--wait=false")


def test_spec_cluster_id_pins_the_id_and_is_immutable(kube_env, kube_namespace, operator):
    ns, name, pinned = kube_namespace, "restored", "MkU3OEVBNTcwNTJENDM2Qg"
    apply(kube_env, kafkacluster(name, ns, replicas=1, clusterId=pinned))
    kc = wait_for("KafkaCluster Ready", ready(kube_env, ns, name, 1), timeout=120)
    assert kc["status"]["clusterId"] == pinned and rendered_cluster_id(kube_env, ns, name) == pinned
    changed = kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge",
                               "-p", '{"spec": {"clusterId": "AAAAAAAAAAAAAAAAAAAAAA"}}', check=False)
    assert changed.returncode != 0 and "spec.clusterId is immutable" in changed.stderr, changed.stderr
    bad = apply(kube_env, kafkacluster("malformed", ns, clusterId="not-an-id"), check=False)
    assert bad.returncode != 0 and "spec.clusterId" in bad.stderr, bad.stderr
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns, "--wait=false")


def test_an_ordered_ready_statefulset_becomes_parallel_without_restarting_a_broker(kube_env, kube_namespace, crds):
    """What an earlier operator left: an OrderedReady StatefulSet with running pods. The field is
    immutable; the operator replaces the StatefulSet orphaning the pods, and the new one adopts them."""
    from flotilla_operator.builders import build_all
    from flotilla_operator.builders.common import Owner
    from flotilla_operator.builders.roll import TEMPLATE_HASH_ANNOTATION
    from flotilla_operator.api.common import parse_spec
    from flotilla_operator.api.kafka_cluster import KAFKA_CLUSTER

    ns, name = kube_namespace, "legacy"
    apply(kube_env, kafkacluster(name, ns, replicas=3))
    body = get_json(kube_env, "kafkacluster", name, "-n", ns)
    desired = build_all(Owner.from_body(body), parse_spec(KAFKA_CLUSTER, body["spec"]), image=IMAGE)
    for obj in desired.objects:
        if obj["kind"] == "StatefulSet":
            obj["spec"]["podManagementPolicy"] = "OrderedReady"
            del obj["metadata"]["annotations"][TEMPLATE_HASH_ANNOTATION]
        kube_env.kubectl("apply", "--server-side", "--field-manager=flotilla-operator", "-f", "-",
                         input=json.dumps(obj))
    wait_for("3 legacy pods", lambda: len(broker_pods(kube_env, ns, name)) == 3, timeout=120)
    old_sts = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)
    assert old_sts["spec"]["podManagementPolicy"] == "OrderedReady"
    pods_before = {n: p["metadata"]["uid"] for n, p in broker_pods(kube_env, ns, name).items()}

    with running_operator(kube_env):
        def replaced():
            sts = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)
            return sts if sts and sts["metadata"]["uid"] != old_sts["metadata"]["uid"] else None
        sts = wait_for("StatefulSet replaced", replaced, timeout=60)
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        wait_for("KafkaCluster Ready", ready(kube_env, ns, name), timeout=120)

        def adopted():
            pods = broker_pods(kube_env, ns, name)
            owners = {n: [r["uid"] for r in p["metadata"].get("ownerReferences") or []] for n, p in pods.items()}
            return pods if all(o == [sts["metadata"]["uid"]] for o in owners.values()) and len(pods) == 3 else None
        pods = wait_for("pods adopted by the new StatefulSet", adopted, timeout=60)
        # No broker was restarted: the same pods, now owned by the Parallel StatefulSet.
        assert {n: p["metadata"]["uid"] for n, p in pods.items()} == pods_before
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns, "--wait=false")


def kafkatopic(cluster: str, name: str, isr: list[list[int]]) -> dict:
    """A KafkaTopic with its status as the brokers write it: three replicas per partition."""
    return {
        "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
        "metadata": {"name": name, "labels": {"flotilla.io/cluster": cluster}},
        "spec": {"topicName": name, "partitions": len(isr), "replicas": 3},
        "status": {"topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "assignment": [
            {"leader": i[0], "leaderEpoch": 0, "replicas": [0, 1, 2], "isr": i} for i in isr]},
    }


def test_a_roll_waits_for_every_isr_to_be_full(kube_env, kube_namespace, operator):
    """With Parallel pod management the StatefulSet alone would roll the next broker whatever the
    ISRs; the operator holds the roll while a partition is short of an in-sync replica."""
    ns, name = kube_namespace, "gated"
    apply(kube_env, kafkacluster(name, ns, replicas=3))
    wait_for("KafkaCluster Ready", ready(kube_env, ns, name), timeout=120)
    sts_name = f"{name}-broker"
    old_revision = get_json(kube_env, "statefulset", sts_name, "-n", ns)["status"]["updateRevision"]
    # Broker 2 has fallen out of the ISR of orders-1 (kwok's pods stay Ready whatever happens).
    write_topic(kube_env, ns, kafkatopic(name, "orders", [[0, 1, 2], [1, 0]]))
    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge",
                     "-p", json.dumps({"spec": {"config": {"log.retention.ms": "7200000"}}}))

    def held():
        kc = get_json(kube_env, "kafkacluster", name, "-n", ns)
        sts = get_json(kube_env, "statefulset", sts_name, "-n", ns)
        msg = condition(kc, "Reconciling").get("message", "")
        seen = sts["status"].get("updateRevision") != old_revision
        return (sts, msg) if seen and "broker 2 waits: 1 partition(s) without a full ISR (orders-1)" in msg else msg
    sts, _ = wait_for("the roll held for the ISR", lambda: (lambda r: r if isinstance(r, tuple) else None)(held()),
                      timeout=60)
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    time.sleep(4)  # past a resync (3 s): still held, no broker replaced
    assert all(p["metadata"]["labels"]["controller-revision-hash"] == old_revision
               for p in broker_pods(kube_env, ns, name).values())

    # Broker 2 is back in the ISR: the roll goes on, one broker at a time, to the end.
    write_topic(kube_env, ns, kafkatopic(name, "orders", [[0, 1, 2], [1, 0, 2]]))
    kc = wait_for("KafkaCluster Ready after the roll", ready(kube_env, ns, name), timeout=120)
    sts = get_json(kube_env, "statefulset", sts_name, "-n", ns)
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"] != old_revision
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
    assert all(p["metadata"]["labels"]["controller-revision-hash"] == sts["status"]["updateRevision"]
               for p in broker_pods(kube_env, ns, name).values())
    assert condition(kc, "Reconciling")["status"] == "False"
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns, "--wait=false")
