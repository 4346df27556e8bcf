"""The Helm chart against the test control plane: lint and template are clean, `helm install`
brings the CRDs and the operator's RBAC, the chart's ServiceAccount may do exactly what the
operator does in the release's namespace and nothing in the others (issue 38; watchAllNamespaces
grants every namespace, and turning it off again takes that away), and `flotilla operator`, run as
the chart's Deployment runs it (a subprocess, authenticated as that ServiceAccount, watching the
release's namespace), turns a KafkaCluster into Ready brokers.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_chart.py
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from flotilla import install_render
from flotilla.testenv.ports import free_port
from tests.support import operator_rbac
from flotilla.testenv.brokers.crds import remove_crds
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "flotilla"
RELEASE = "flotilla"
SERVICE_ACCOUNT = "flotilla-operator"  # the chart's <release>-operator
CRD_NAMES = ["kafkaclusters.flotilla.io", "clientquotas.flotilla.io", "recorddeletions.flotilla.io",
             "kafkatopics.flotilla.io", "kafkausers.flotilla.io"]


def helm_available(kube_env) -> bool:
    return (kube_env.bin_dir / "helm").is_file() or kube_env.run("helm", "version", check=False).returncode == 0


@pytest.fixture(scope="module")
def helm(kube_env):
    try:
        if not helm_available(kube_env):
            pytest.skip("no helm binary (flotilla testenv build provides one)")
    except FileNotFoundError:
        pytest.skip("no helm binary (flotilla testenv build provides one)")
    return kube_env


@pytest.fixture(scope="module")
def release(helm, tmp_path_factory):
    """`helm install` into a namespace of its own; uninstalled (and CRDs removed) afterwards."""
    ns = f"flotilla-system-{os.getpid()}"
    # CRDs left by another module would make helm skip its crds/ folder: start clean.
    remove_crds(helm)
    proc = helm.helm("install", RELEASE, str(CHART), "--namespace", ns, "--create-namespace",
                     "--set", "image.repository=flotilla", "--set", "image.tag=never-pulled", "--wait=false")
    yield ns, proc
    helm.helm("uninstall", RELEASE, "--namespace", ns, check=False)
    remove_crds(helm)  # waits, releasing leftover finalizers: a terminating CRD refuses creates
    helm.kubectl("delete", "namespace", ns, "--wait=false", "--ignore-not-found", check=False)


def test_helm_lint_is_clean(helm):
    # --kube-version: the test environment's helm, built from source, assumes Kubernetes 1.20.
    kube = ("--kube-version", install_render.KUBE_VERSION)
    proc = helm.helm("lint", "--strict", str(CHART), *kube)
    assert "1 chart(s) linted, 0 chart(s) failed" in proc.stdout, proc.stdout
    assert "[WARNING]" not in proc.stdout and "[ERROR]" not in proc.stdout, proc.stdout
    namespaced = helm.helm("lint", "--strict", str(CHART), *kube, "--set", "watchNamespaces={a,b}", "--set", "podMonitor.enabled=true")
    assert "0 chart(s) failed" in namespaced.stdout
    everywhere = helm.helm("lint", "--strict", str(CHART), *kube, "--set", "watchAllNamespaces=true", "--set", "podMonitor.enabled=true")
    assert "0 chart(s) failed" in everywhere.stdout
    both = helm.helm("template", RELEASE, str(CHART), *kube, "--set", "watchAllNamespaces=true", "--set", "watchNamespaces={a}",
                     check=False)
    assert both.returncode != 0 and "leave watchNamespaces empty" in both.stderr
    too_old = helm.helm("template", RELEASE, str(CHART), "--kube-version", "1.29.9", check=False)
    assert too_old.returncode != 0 and ">=1.30.0-0" in too_old.stderr, too_old.stderr
    # Two replicas without a leader would both reconcile (helm lint reports a template's fail only as INFO).
    bad = helm.helm("template", RELEASE, str(CHART), *kube, "--set", "replicaCount=2", "--set",
                    "leaderElection.enabled=false", check=False)
    assert bad.returncode != 0 and "replicaCount" in bad.stdout + bad.stderr
    slow = helm.helm("template", RELEASE, str(CHART), *kube, "--set", "leaderElection.renewDeadlineSeconds=20",
                     check=False)
    assert slow.returncode != 0 and "renewDeadlineSeconds < leaseDurationSeconds" in slow.stderr


def test_helm_template_renders_what_we_expect(helm):
    out = helm.helm("template", RELEASE, str(CHART), "--kube-version", install_render.KUBE_VERSION, "--namespace", "ops", "--include-crds").stdout
    docs = [d for d in yaml.safe_load_all(out) if d]
    kinds = sorted((d["kind"], d["metadata"]["name"]) for d in docs)
    assert ("Deployment", "flotilla-operator") in kinds
    # Issue 38: by default its rights reach the release's namespace only.
    assert ("ClusterRole", "flotilla-operator") in kinds and ("ClusterRoleBinding", "flotilla-operator") not in kinds
    assert [d["metadata"]["namespace"] for d in docs if d["kind"] == "RoleBinding"] == ["ops", "ops"]  # + election
    assert sum(1 for k, _ in kinds if k == "CustomResourceDefinition") == 5  # KafkaCluster, ClientQuota, RecordDeletion, KafkaTopic, KafkaUser
    assert not any(k == "PodMonitor" for k, _ in kinds)
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["flotilla", "operator"]
    assert "--metrics-address=0.0.0.0:9405" in container["args"] and "--all-namespaces" not in container["args"]
    assert [a for a in container["args"] if a.startswith("--namespace")] == ["--namespace=ops"]
    # Two replicas electing a leader (election.yaml): rolled one at a time, probed, one kept by a PDB.
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {"type": "RollingUpdate",
                                              "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    assert "--leader-elect" in container["args"] and "--lease-name=flotilla-operator" in container["args"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "health"}
    (pdb,) = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"]["minAvailable"] == 1 and pdb["spec"]["selector"]["matchLabels"] == \
        deployment["spec"]["selector"]["matchLabels"]
    assert ("Lease", "flotilla-operator") in kinds
    (spread,) = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"]
    assert spread["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    single = [d for d in yaml.safe_load_all(helm.helm("template", RELEASE, str(CHART), "--kube-version", install_render.KUBE_VERSION,
                                                      "--set", "replicaCount=1",
                                                      "--set", "leaderElection.enabled=false").stdout) if d]
    assert next(d for d in single if d["kind"] == "Deployment")["spec"]["strategy"]["type"] == "Recreate"
    assert not [d for d in single if d["kind"] in {"Lease", "PodDisruptionBudget"}]
    # Chart CRDs are the rendered ones, byte for byte in content.
    for d in docs:
        if d["kind"] == "CustomResourceDefinition":
            plural = d["spec"]["names"]["plural"]
            assert d == yaml.safe_load((ROOT / "crds" / f"flotilla.io_{plural}.yaml").read_text())
    scoped = helm.helm("template", RELEASE, str(CHART), "--kube-version", install_render.KUBE_VERSION, "--namespace", "ops", "--set", "watchNamespaces={team-a,team-b}",
                       "--set", "podMonitor.enabled=true").stdout
    scoped_docs = [d for d in yaml.safe_load_all(scoped) if d]
    bindings = sorted(d["metadata"]["namespace"] for d in scoped_docs if d["kind"] == "RoleBinding")
    assert bindings == ["ops", "team-a", "team-b"]  # the election Lease's stays in the release's namespace
    assert not any(d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "flotilla-operator" for d in scoped_docs)
    assert any(d["kind"] == "PodMonitor" for d in scoped_docs)
    args = next(d for d in scoped_docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--namespace=team-b" in args and "--namespace=ops" not in args
    wide = [d for d in yaml.safe_load_all(helm.helm("template", RELEASE, str(CHART), "--kube-version", install_render.KUBE_VERSION, "--namespace", "ops", "--set",
                                                    "watchAllNamespaces=true").stdout) if d]
    assert [d["metadata"]["name"] for d in wide if d["kind"] == "RoleBinding"] == ["flotilla-operator-election"]
    assert any(d["kind"] == "ClusterRoleBinding" and d["metadata"]["name"] == "flotilla-operator" for d in wide)
    args = next(d for d in wide if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--all-namespaces" in args and not [a for a in args if a.startswith("--namespace")]


def test_install_brings_crds_and_rbac(helm, release):
    ns, _ = release
    for crd in CRD_NAMES:
        helm.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    deployment = json.loads(helm.kubectl("get", "deployment", "flotilla-operator", "-n", ns, "-o", "json").stdout)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == SERVICE_ACCOUNT
    status = helm.helm("status", RELEASE, "--namespace", ns).stdout
    assert "STATUS: deployed" in status


def can_i(kube_env, ns: str, sa_ns: str, verb: str, resource: str, subresource: str | None = None) -> bool:
    return operator_rbac.can_i(kube_env, ns, f"{sa_ns}:{SERVICE_ACCOUNT}", verb, resource, subresource)


def test_service_account_may_do_what_the_operator_does_and_no_more(helm, release, kube_namespace):
    sa_ns, _ = release
    missing, excess = operator_rbac.missing_and_excess(helm, sa_ns, f"{sa_ns}:{SERVICE_ACCOUNT}",
                                                       operator_rbac.NEEDED + operator_rbac.ELECTION)
    assert not missing, f"chart RBAC lacks {missing}"
    assert not excess, f"chart RBAC grants {excess}"
    # Issue 38: nothing in a namespace it does not watch (Secrets, RoleBindings...).
    assert operator_rbac.granted_elsewhere(helm, kube_namespace, f"{sa_ns}:{SERVICE_ACCOUNT}") == []
    # Cluster-scoped: it may follow CRDs, not change them.
    assert can_i(helm, kube_namespace, sa_ns, "watch", "customresourcedefinitions.apiextensions.k8s.io")
    assert not can_i(helm, kube_namespace, sa_ns, "delete", "customresourcedefinitions.apiextensions.k8s.io")


def _upgrade(helm, ns: str, *values: str) -> None:
    helm.helm("upgrade", RELEASE, str(CHART), "--namespace", ns, "--set", "image.repository=flotilla",
              "--set", "image.tag=never-pulled", "--wait=false", *values)


def test_watch_all_namespaces_grants_every_namespace_and_turning_it_off_takes_that_away(helm, release, kube_namespace):
    sa_ns, _ = release
    account = f"{sa_ns}:{SERVICE_ACCOUNT}"
    _upgrade(helm, sa_ns, "--set", "watchAllNamespaces=true")
    try:
        missing, excess = operator_rbac.missing_and_excess(helm, kube_namespace, account)
        assert not missing, f"chart RBAC with watchAllNamespaces lacks {missing}"
        assert not excess, f"chart RBAC with watchAllNamespaces grants {excess}"
    finally:
        _upgrade(helm, sa_ns)
    # Helm removes the ClusterRoleBinding: no Secrets or RoleBindings outside the release's namespace
    # again, and the RoleBinding in it is back.
    forbidden = operator_rbac.ELSEWHERE_FORBIDDEN
    assert operator_rbac.allowed(helm, kube_namespace, account, forbidden) == []
    assert operator_rbac.allowed(helm, sa_ns, account, forbidden) == forbidden


def _service_account_kubeconfig(kube_env, sa_ns: str, path: Path) -> Path:
    token = kube_env.kubectl("create", "token", SERVICE_ACCOUNT, "-n", sa_ns, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(kube_env.kubeconfig).read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    cluster = next(c for c in admin["clusters"] if c["name"] == context["cluster"])
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "operator",
        "clusters": [cluster],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": cluster["name"], "user": "operator"}}],
    }))
    return path


def test_flotilla_operator_runs_with_the_chart_rbac(helm, release, tmp_path):
    sa_ns, _ = release
    kubeconfig = _service_account_kubeconfig(helm, sa_ns, tmp_path / "operator.kubeconfig")
    metrics_port, liveness_port = free_port(), free_port()
    env = dict(helm.env, KUBECONFIG=str(kubeconfig), FLOTILLA_BROKER_IMAGE="flotilla:never-pulled", PYTHONUNBUFFERED="1")
    log = (tmp_path / "operator.log").open("w+")
    proc = subprocess.Popen(
        # As the chart's Deployment runs it by default: the release's namespace only.
        [sys.executable, "-m", "flotilla.cli", "operator", f"--namespace={sa_ns}",
         f"--metrics-address=127.0.0.1:{metrics_port}", f"--liveness-address=127.0.0.1:{liveness_port}",
         "--resync-seconds=5"],
        env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
    )
    try:
        cluster = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
                   "metadata": {"name": "chart", "namespace": sa_ns},
                   "spec": {"replicas": 2, "storage": {"type": "ephemeral"}}}
        helm.kubectl("apply", "-f", "-", input=json.dumps(cluster))

        def ready():
            if proc.poll() is not None:
                log.seek(0)
                pytest.fail(f"operator exited with {proc.returncode}:\n{log.read()[-4000:]}")
            kc = json.loads(helm.kubectl("get", "kafkacluster", "chart", "-n", sa_ns, "-o", "json").stdout)
            conds = {c["type"]: c for c in (kc.get("status") or {}).get("conditions") or []}
            return kc if conds.get("Ready", {}).get("status") == "True" else None

        kc = wait_for("KafkaCluster Ready under the chart's RBAC", ready, timeout=120)
        assert kc["status"]["readyReplicas"] == 2
        assert kc["status"]["observedGeneration"] == kc["metadata"]["generation"]
        health = urllib.request.urlopen(f"http://127.0.0.1:{liveness_port}/healthz", timeout=5)
        assert health.status == 200
        metrics = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()
        assert 'flotilla_operator_reconcile_total{kind="KafkaCluster",result="success"}' in metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.seek(0)
        output = log.read()
        log.close()
    # It said where it is and what it watches.
    assert "kube context 'operator'" in output, output[-2000:]
    assert f"watching namespaces {sa_ns}" in output
    assert f"metrics http://127.0.0.1:{metrics_port}/metrics" in output
    refused = operator_rbac.refusals(output)
    assert not refused, "the API server refused the operator:\n" + "\n".join(refused[:20])
