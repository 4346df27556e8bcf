"""install/flotilla.yaml against the test control plane: `kubectl apply --server-side -f` installs
the CRDs, the flotilla Namespace, the operator's Deployment, ServiceAccount and RBAC in one go, a
second apply changes nothing, and the ServiceAccount may do exactly what the operator does.

    pytest -m kube tests/e2e/test_install_manifest.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.support import operator_rbac
from flotilla.testenv.brokers.crds import crd_names, remove_crds

pytestmark = pytest.mark.kube

MANIFEST = Path(__file__).resolve().parents[2] / "install" / "flotilla.yaml"
ACCOUNT = "flotilla:flotilla-operator"
CLUSTER_SCOPED = [(d["kind"], d["metadata"]["name"]) for d in yaml.safe_load_all(MANIFEST.read_text())
                  if d and d["kind"] in {"ClusterRole", "ClusterRoleBinding"}]


@pytest.fixture(scope="module")
def installed(kube_env):
    """The user's one command, on a control plane without our CRDs; removed again afterwards (the
    Helm chart's test installs the same cluster-wide names)."""
    remove_crds(kube_env)  # a fresh install, as a user's cluster would be
    # The admission policies outlive remove_crds (deleting and re-creating one left it unenforced
    # for a while), and the chart's test may have applied them under Helm's field manager: take
    # them over, as a user moving from the chart to the manifest would. Later applies do not force.
    first = kube_env.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(MANIFEST))
    yield first
    for kind, name in CLUSTER_SCOPED:
        kube_env.kubectl("delete", kind.lower(), name, "--ignore-not-found", check=False)
    # Waited for: the name is fixed, and applying into a terminating namespace is refused.
    kube_env.kubectl("delete", "namespace", "flotilla", "--ignore-not-found", "--timeout=90s", check=False, timeout=120)
    remove_crds(kube_env)


def test_one_command_installs_everything(kube_env, installed):
    for crd in crd_names():
        kube_env.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    deployment = json.loads(kube_env.kubectl("get", "deployment", "flotilla-operator", "-n", "flotilla", "-o", "json").stdout)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "flotilla-operator"
    assert pod["containers"][0]["command"] == ["flotilla", "operator"]
    kube_env.kubectl("get", "serviceaccount", "flotilla-operator", "-n", "flotilla")
    for kind, name in CLUSTER_SCOPED:
        kube_env.kubectl("get", kind.lower(), name)
    # Our short names answer (and are not Strimzi's kc/kt).
    assert kube_env.kubectl("get", "fkc", "-A", check=False).returncode == 0
    assert kube_env.kubectl("get", "fkt", "-A", check=False).returncode == 0


def test_second_apply_is_a_no_op(kube_env, installed):
    again = kube_env.kubectl("apply", "--server-side", "-f", str(MANIFEST))
    lines = [line for line in again.stdout.splitlines() if line.strip()]
    assert lines and all(line.endswith("serverside-applied") for line in lines), again.stdout
    before = json.loads(kube_env.kubectl("get", "clusterrole", "flotilla-operator", "-o", "json").stdout)
    kube_env.kubectl("apply", "--server-side", "-f", str(MANIFEST))
    after = json.loads(kube_env.kubectl("get", "clusterrole", "flotilla-operator", "-o", "json").stdout)
    assert before["metadata"]["resourceVersion"] == after["metadata"]["resourceVersion"]


def test_service_account_may_do_what_the_operator_does_and_no_more(kube_env, installed, kube_namespace):
    for ns in (kube_namespace, "flotilla"):
        missing, excess = operator_rbac.missing_and_excess(kube_env, ns, ACCOUNT)
        assert not missing, f"install/flotilla.yaml RBAC lacks {missing} in {ns}"
        assert not excess, f"install/flotilla.yaml RBAC grants {excess} in {ns}"
    # Cluster-scoped: it follows CRDs and may not change them, nor read Secrets anywhere.
    can = lambda *a: operator_rbac.can_i(kube_env, kube_namespace, ACCOUNT, *a)  # noqa: E731
    assert can("watch", "customresourcedefinitions.apiextensions.k8s.io")
    assert not can("delete", "customresourcedefinitions.apiextensions.k8s.io")
    assert not can("create", "customresourcedefinitions.apiextensions.k8s.io")
    # Secrets: it holds get/list/watch/create/update only to grant the brokers their SCRAM
    # credentials' Secret (Kubernetes forbids escalation); never delete or patch, anywhere.
    for verb in ("delete", "patch"):
        assert kube_env.kubectl("auth", "can-i", verb, "secrets", "--all-namespaces",
                                f"--as=system:serviceaccount:{ACCOUNT}", check=False).stdout.strip() == "no"
