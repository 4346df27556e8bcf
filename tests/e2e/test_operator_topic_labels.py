"""A KafkaTopic's cluster is its flotilla.io/cluster label alone (issue 41 item 6), with the
operator (kopf's KopfRunner, watching one namespace) on the test control plane: no broker runs, the
KafkaCluster is paused, so only the operator's start-up and KafkaTopic handling act.

    .venv/bin/pytest tests/e2e/test_operator_topic_labels.py -x -q

Before the operator starts, a KafkaTopic that the brokers of `demo` took in through
app.kubernetes.io/instance alone (its status has their topic id) and one whose only label names a
Helm release. At start-up the operator logs the API server's Kubernetes as supported (1.30 or
later), labels the first flotilla.io/cluster=demo and logs it, and gives the second Ready=False,
reason ClusterLabelMissing, naming the label to add; a KafkaTopic applied afterwards without the
label gets the same condition, and keeps its spec.
"""

from __future__ import annotations

import json

import pytest
from flotilla.testenv.brokers.crds import install_crds
from flotilla.testenv.waiting import wait_for
from tests.e2e.test_operator import get_json, kafkacluster, write_topic

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]

INSTANCE, CLUSTER = "app.kubernetes.io/instance", "flotilla.io/cluster"


def topic(name: str, labels: dict, status: dict | None = None) -> dict:
    obj = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
           "metadata": {"name": name, "labels": labels}, "spec": {"partitions": 1, "replicas": 1}}
    if status:
        obj["status"] = status
    return obj


def ready(kube_env, ns: str, name: str) -> dict:
    obj = get_json(kube_env, "kafkatopics.flotilla.io", name, "-n", ns)
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == "Ready"), {})


def test_start_up_labels_what_relied_on_the_old_label_and_marks_topics_of_no_cluster(kube_env, kube_namespace):
    from kopf.testing import KopfRunner

    ns = kube_namespace
    install_crds(kube_env)
    paused = kafkacluster("demo", ns, replicas=1)
    paused["metadata"]["annotations"] = {"flotilla.io/pause-reconciliation": "true"}
    kube_env.kubectl("apply", "-f", "-", input=json.dumps(paused))
    write_topic(kube_env, ns, topic("joined", {INSTANCE: "demo"}, {
        "topicId": "AAAAAAAAAAAAAAAAAAAAAQ", "partitions": 1, "replicationFactor": 1,
        "assignment": [{"leader": 0, "leaderEpoch": 0, "replicas": [0], "isr": [0]}]}))
    kube_env.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(topic("helm-release", {INSTANCE: "my-release"})))

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(kube_env.kubeconfig))
        mp.setenv("FLOTILLA_OPERATOR_NAMESPACES", ns)
        mp.setenv("FLOTILLA_OPERATOR_METRICS_ADDRESS", "127.0.0.1:0")
        with KopfRunner(["run", "--namespace", ns, "--standalone", "-m", "flotilla_operator.handlers"],
                        timeout=60) as runner:
            try:
                wait_for("KafkaTopic joined labelled flotilla.io/cluster=demo", lambda: (get_json(
                    kube_env, "kafkatopics.flotilla.io", "joined", "-n", ns)["metadata"].get("labels") or {}).get(
                    CLUSTER) == "demo", timeout=60)
                marked = wait_for("helm-release marked ClusterLabelMissing", lambda: (lambda c: c if c.get(
                    "reason") == "ClusterLabelMissing" else None)(ready(kube_env, ns, "helm-release")), timeout=60)
                kube_env.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(topic("later", {})))
                later = wait_for("later marked ClusterLabelMissing", lambda: (lambda c: c if c.get(
                    "reason") == "ClusterLabelMissing" else None)(ready(kube_env, ns, "later")), timeout=60)
            except BaseException:
                print(runner.output[-6000:])
                raise
    assert runner.exception is None, runner.output[-4000:]

    assert marked["status"] == "False" and "add the label flotilla.io/cluster=<cluster name>" in marked["message"]
    assert "app.kubernetes.io/instance=my-release no longer names a cluster" in marked["message"]
    assert later["status"] == "False" and "app.kubernetes.io/instance" not in later["message"]
    joined = get_json(kube_env, "kafkatopics.flotilla.io", "joined", "-n", ns)
    assert joined["status"]["topicId"] == "AAAAAAAAAAAAAAAAAAAAAQ"  # the brokers' status is left alone
    assert not any(c.get("reason") == "ClusterLabelMissing" for c in joined["status"].get("conditions") or ())
    assert get_json(kube_env, "kafkatopics.flotilla.io", "later", "-n", ns)["spec"] == {"partitions": 1, "replicas": 1}
    output = runner.output
    assert "supported (Flotilla needs 1.30 or later)" in output, output[-3000:]
    assert (f"KafkaTopic {ns}/joined named its cluster by app.kubernetes.io/instance alone: labelled "
            "flotilla.io/cluster=demo") in output, output[-3000:]
