"""The test control plane is a real one: API server validation, controllers, scheduler, kwok.

Runs against the control plane `kube_env` starts (or FLOTILLA_KUBECONFIG's cluster).
"""

from __future__ import annotations

import json
import os
import re
import uuid

import pytest

from flotilla.testenv import versions
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.kube

# kwok never pulls or runs images; on a kind cluster (tests/kind/run-e2e.sh) pods really run, so
# use the broker image loaded into it.
IMAGE = os.environ.get("FLOTILLA_IMAGE", "flotilla:never-pulled")

GROUP = "testenv.flotilla.io"
CRD_NAME = f"widgets.{GROUP}"

CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": CRD_NAME},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {
                        "type": "object",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "required": ["size"],
                                "properties": {
                                    "size": {"type": "integer", "minimum": 1, "maximum": 9},
                                    "colour": {"type": "string", "enum": ["red", "blue"]},
                                },
                            }
                        },
                    }
                },
            }
        ],
    },
}




def get_json(kube_env, *args: str) -> dict:
    return json.loads(kube_env.kubectl("get", *args, "-o", "json").stdout)


def widget(name: str, namespace: str, spec: dict) -> str:
    return json.dumps({"apiVersion": f"{GROUP}/v1", "kind": "Widget",
                       "metadata": {"name": name, "namespace": namespace}, "spec": spec})


@pytest.fixture(scope="module")
def widget_crd(kube_env):
    kube_env.kubectl("apply", "-f", "-", input=json.dumps(CRD))
    kube_env.kubectl("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    yield CRD_NAME
    kube_env.kubectl("delete", "crd", CRD_NAME, "--wait=false", "--ignore-not-found", check=False)


def test_server_reports_the_pinned_version(kube_env):
    if kube_env.control_plane is None:
        pytest.skip("an external cluster (FLOTILLA_KUBECONFIG) runs its own version")
    server = json.loads(kube_env.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert server["gitVersion"] == versions.KUBERNETES_VERSION


def test_crd_apply_and_create_an_instance(kube_env, kube_namespace, widget_crd):
    kube_env.kubectl("apply", "-f", "-", input=widget("w1", kube_namespace, {"size": 3, "colour": "red"}))
    got = get_json(kube_env, "widget", "w1", "-n", kube_namespace)
    assert got["spec"] == {"size": 3, "colour": "red"}
    assert got["metadata"]["uid"]
    listed = get_json(kube_env, "widgets", "-n", kube_namespace)
    assert [item["metadata"]["name"] for item in listed["items"]] == ["w1"]


@pytest.mark.parametrize(
    ("spec", "field"),
    [({"size": 42}, "spec.size"), ({"size": 2, "colour": "green"}, "spec.colour"), ({}, "spec.size")],
    ids=["above-maximum", "not-in-enum", "required-missing"],
)
def test_server_side_validation_rejects_an_invalid_instance(kube_env, kube_namespace, widget_crd, spec, field):
    proc = kube_env.kubectl("create", "-f", "-", input=widget("bad", kube_namespace, spec), check=False)
    assert proc.returncode != 0
    assert "is invalid" in proc.stderr
    assert field in proc.stderr
    gone = kube_env.kubectl("get", "widget", "bad", "-n", kube_namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_statefulset_pods_are_created_scheduled_and_ready(kube_env, kube_namespace):
    ns = kube_namespace
    labels = {"app": "sts-proof"}
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "sts-proof", "namespace": ns},
               "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": 9092}]}}
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "sts-proof", "namespace": ns},
        "spec": {
            "serviceName": "sts-proof", "replicas": 3, "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "broker", "image": IMAGE,
                                         "imagePullPolicy": "IfNotPresent"}]},
            },
        },
    }
    kube_env.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                           "items": [service, sts]}))

    def ready_replicas():
        status = get_json(kube_env, "statefulset", "sts-proof", "-n", ns).get("status", {})
        return status.get("readyReplicas", 0) == 3 and status

    wait_for("3 ready replicas", ready_replicas, timeout=120)
    pods = get_json(kube_env, "pods", "-n", ns, "-l", "app=sts-proof")["items"]
    assert sorted(p["metadata"]["name"] for p in pods) == ["sts-proof-0", "sts-proof-1", "sts-proof-2"]
    node_names = {n["metadata"]["name"] for n in get_json(kube_env, "nodes")["items"]}
    for pod in pods:
        owner = pod["metadata"]["ownerReferences"][0]
        assert (owner["kind"], owner["name"]) == ("StatefulSet", "sts-proof")  # controller-manager
        assert pod["spec"]["nodeName"] in node_names  # scheduler
        assert pod["status"]["phase"] == "Running"  # kwok
        ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert ready["Ready"] == "True"
        assert pod["status"].get("podIP")


def test_a_pod_marked_not_ready_as_the_node_controller_does_is_ready_again(kube_env, kube_namespace):
    """What the node controller does to the pods of a lapsed node (Ready=False, nothing else), done
    by hand: kwok's pod-ready-again stage (flotilla/testenv/kwok_stages.py) makes the pod Ready
    again, keeping its IP. (tests/e2e/test_kwok_node_lapse.py lapses a node for real.)"""
    ns = kube_namespace
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lapsed", "namespace": ns},
           "spec": {"containers": [{"name": "broker", "image": IMAGE}]}}
    kube_env.kubectl("apply", "-f", "-", input=json.dumps(pod))

    def ready_and_ip():
        got = get_json(kube_env, "pod", "lapsed", "-n", ns)
        ready = {c["type"]: c["status"] for c in got["status"].get("conditions", [])}.get("Ready")
        return ready, got["status"].get("podIP"), got["metadata"]["uid"]

    before = wait_for("the pod Ready", ready_and_ip, until=lambda r: r[0] == "True", timeout=60)
    patched = json.loads(kube_env.kubectl(
        "patch", "pod", "lapsed", "-n", ns, "--subresource=status", "--type=strategic", "-o", "json",
        "-p", json.dumps({"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "NodeNotReady"}]}}),
    ).stdout)
    assert {c["type"]: c["status"] for c in patched["status"]["conditions"]}["Ready"] == "False"
    wait_for("the pod Ready again, same IP, same pod", ready_and_ip,
             until=lambda r: r == ("True", before[1], before[2]), timeout=60)


def test_garbage_collector_deletes_dependents(kube_env, kube_namespace):
    ns = kube_namespace
    kube_env.kubectl("create", "configmap", "owner", "-n", ns)
    uid = get_json(kube_env, "configmap", "owner", "-n", ns)["metadata"]["uid"]
    dependent = {"apiVersion": "v1", "kind": "ConfigMap",
                 "metadata": {"name": "dependent", "namespace": ns,
                              "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                                   "name": "owner", "uid": uid}]}}
    kube_env.kubectl("create", "-f", "-", input=json.dumps(dependent))
    kube_env.kubectl("delete", "configmap", "owner", "-n", ns)
    wait_for("the dependent ConfigMap to be garbage-collected",
             lambda: kube_env.kubectl("get", "configmap", "dependent", "-n", ns,
                                      check=False).returncode != 0, timeout=60)


def test_deleting_a_namespace_removes_it_and_its_pods(kube_env):
    ns = f"doomed-{uuid.uuid4().hex[:8]}"
    kube_env.kubectl("create", "namespace", ns)
    kube_env.kubectl("create", "deployment", "web", f"--image={IMAGE}", "--replicas=2", "-n", ns)
    wait_for("2 running pods", lambda: len([
        p for p in get_json(kube_env, "pods", "-n", ns)["items"] if p["status"].get("phase") == "Running"
    ]) == 2, timeout=120)
    kube_env.kubectl("delete", "namespace", ns, "--wait=false")
    phase = get_json(kube_env, "namespace", ns)["status"]["phase"]
    assert phase == "Terminating"

    def gone():
        proc = kube_env.kubectl("get", "namespace", ns, check=False)
        return proc.returncode != 0 and "NotFound" in proc.stderr

    wait_for(f"namespace {ns} to be finalised", gone, timeout=120)
    assert "doomed" not in kube_env.kubectl("get", "pods", "-A").stdout


def test_helm_installs_a_chart(kube_env, kube_namespace, tmp_path):
    chart = tmp_path / "proof"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: proof\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("greeting: hello\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
    )
    kube_env.helm("install", "proof", str(chart), "-n", kube_namespace, "--set", "greeting=hi", "--wait")
    cm = get_json(kube_env, "configmap", "proof-cm", "-n", kube_namespace)
    assert cm["data"] == {"greeting": "hi"}
    assert "proof" in kube_env.helm("list", "-n", kube_namespace, "-q").stdout.split()


def test_cli_up_prints_one_line_and_down_leaves_no_process(kube_env, tmp_path):
    if kube_env.control_plane is None:
        pytest.skip("needs the built binaries, not an external cluster")
    import subprocess
    import sys

    from flotilla.testenv import processes

    state = tmp_path / "env"
    up = subprocess.run([sys.executable, "-m", "flotilla.cli", "testenv", "up", "--dir", str(state),
                         "--nodes", "1"], capture_output=True, text=True, timeout=180)
    try:
        assert up.returncode == 0, up.stderr
        assert up.stdout == f"export KUBECONFIG={state / 'kubeconfig'}\n"
        recorded = json.loads((state / "state.json").read_text())["processes"]
        assert [p["name"] for p in recorded] == [
            "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
        assert all(processes.is_running(p["pid"]) for p in recorded)
        nodes = kube_env.kubectl("--kubeconfig", str(state / "kubeconfig"), "get", "nodes", "-o", "name")
        assert nodes.stdout.split() == ["node/kwok-node-0"]
    finally:
        down = subprocess.run([sys.executable, "-m", "flotilla.cli", "testenv", "down", "--dir", str(state)],
                              capture_output=True, text=True, timeout=120)
    assert down.returncode == 0, down.stderr
    for p in recorded:
        assert not processes.is_running(p["pid"]), p
        assert processes.group_members(p["pid"]) == []
    assert not (state / "state.json").exists()


INNER_FAILING_TEST = '''
import logging

from flotilla.testenv.waiting import wait_for


def test_waits_for_what_never_happens(kube_env, kube_namespace):
    logging.getLogger("flotilla_operator").warning("the operator said this during the test")
    wait_for("pod never-there", lambda: kube_env.kubectl("get", "pod", "never-there", "-n", kube_namespace),
             timeout=2, interval=0.5)
'''


def test_a_failed_wait_names_its_last_observation_and_the_report_shows_the_cluster(kube_env, tmp_path):
    """A test on the cluster that fails: its wait names the last error it saw (not None), and the
    report carries the cluster's pods, nodes and events and the operator's log of that test."""
    import subprocess
    import sys
    from pathlib import Path

    (tmp_path / "test_inner.py").write_text(INNER_FAILING_TEST)
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.support.pytest_plugin", "-p", "flotilla.testenv.pytest_plugin",
         "-p", "no:cacheprovider", "-q", "--rootdir", str(tmp_path), "-c", os.devnull, str(tmp_path / "test_inner.py")],
        capture_output=True, text=True, timeout=180, cwd=root,
        env={**os.environ, "FLOTILLA_KUBECONFIG": str(kube_env.kubeconfig),
             "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))},
    )
    out = proc.stdout
    assert proc.returncode == 1 and re.search(r"^1 failed\b", out, re.MULTILINE), out + proc.stderr
    assert "waiting for pod never-there; last: CommandError" in out and 'pods "never-there" not found' in out, out
    assert "kubectl get pods,nodes -A -o wide" in out and "node/kwok-node-0" in out, out
    assert "kubectl get events -A" in out, out
    assert "operator log (this test)" in out and "the operator said this during the test" in out, out
