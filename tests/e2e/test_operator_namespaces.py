"""An operator restricted to namespaces (`flotilla operator -n A`, the chart's watchNamespaces)
manages KafkaClusters in A and leaves namespace B alone: no StatefulSet or other child there, no
status, finalizer or kopf annotation on B's KafkaCluster, and its log never names B. The operator
runs as its CLI runs it, a process, against the test control plane (kwok pods).

    pytest -m kube tests/e2e/test_operator_namespaces.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

from tests.e2e.test_operator import CHILDREN, IMAGE, condition, get_json, kafkacluster
from flotilla.testenv.brokers.broker_process import REPO_ROOT
from flotilla.testenv.brokers.crds import install_crds, remove_crds
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.kube


@pytest.fixture
def other_namespace(kube_env, kube_namespace):
    name = f"{kube_namespace[:50]}-b{uuid.uuid4().hex[:4]}"
    kube_env.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        kube_env.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False, timeout=30)


@pytest.fixture
def crds(kube_env):
    install_crds(kube_env)
    yield
    remove_crds(kube_env)


@pytest.mark.timeout(300)
def test_operator_restricted_to_a_namespace_leaves_the_others_untouched(kube_env, kube_namespace, other_namespace,
                                                                        crds, tmp_path):
    watched, other = kube_namespace, other_namespace
    # B's KafkaCluster first: by the time A's is Ready, the operator has had longer to touch B's.
    kube_env.kubectl("apply", "-f", "-", input=json.dumps(kafkacluster("untouched", other, replicas=1)))
    kube_env.kubectl("apply", "-f", "-", input=json.dumps(kafkacluster("managed", watched, replicas=1)))
    env = dict(kube_env.env, KUBECONFIG=str(kube_env.kubeconfig), FLOTILLA_BROKER_IMAGE=IMAGE, PYTHONUNBUFFERED="1")
    log_path = tmp_path / "operator.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "flotilla.cli", "operator", "-n", watched, "--resync-seconds=3"],
                                env=env, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
    try:
        def managed_ready():
            assert proc.poll() is None, f"operator exited with {proc.returncode}:\n{log_path.read_text()[-4000:]}"
            kc = get_json(kube_env, "kafkacluster", "managed", "-n", watched)
            return kc if condition(kc, "Ready").get("status") == "True" else (kc.get("status") or {}).get("conditions")

        wait_for(f"KafkaCluster managed in {watched} Ready", managed_ready,
                 until=lambda got: isinstance(got, dict), timeout=120)
        for kind, pattern in CHILDREN:
            assert get_json(kube_env, kind, pattern.format(name="managed"), "-n", watched, check=False), kind
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    output = log_path.read_text()
    assert f"watching namespaces {watched}" in output, output[-2000:]

    kc = get_json(kube_env, "kafkacluster", "untouched", "-n", other)
    assert "status" not in kc, kc["status"]
    assert not kc["metadata"].get("finalizers"), kc["metadata"]
    assert not [a for a in kc["metadata"].get("annotations") or {} if "kopf" in a], kc["metadata"]["annotations"]
    for kind in ("statefulsets", "services", "configmaps", "poddisruptionbudgets", "serviceaccounts", "roles",
                 "rolebindings", "pods"):
        items = get_json(kube_env, kind, "-n", other)["items"]
        # A namespace has its default ServiceAccount and root CA ConfigMap; nothing of Flotilla's.
        ours = [i["metadata"]["name"] for i in items if i["metadata"]["name"].startswith("untouched")]
        assert not ours, (kind, ours)
    assert other not in output, [line for line in output.splitlines() if other in line][:5]
