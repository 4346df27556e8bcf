"""install/flotilla.yaml against the test control plane: `kubectl apply --server-side -f` installs
the CRDs, the flotilla Namespace, the operator's Deployment, ServiceAccount and RBAC in one go, a
second apply changes nothing, and the ServiceAccount may do exactly what the operator does in the
flotilla namespace and nothing in any other (issue 38: no Secrets, no RoleBindings there);
install/flotilla-all-namespaces.yaml gives it the same rights in every namespace, and switching back
as docs/operations.md says takes them away again.

    pytest -m kube tests/e2e/test_install_manifest.py
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import yaml
from tests.support import operator_rbac
from flotilla.testenv.brokers.crds import crd_names, remove_crds

pytestmark = pytest.mark.kube

MANIFEST = Path(__file__).resolve().parents[2] / "install" / "flotilla.yaml"
ALL_NAMESPACES = MANIFEST.with_name("flotilla-all-namespaces.yaml")
ACCOUNT = "flotilla:flotilla-operator"
CLUSTER_SCOPED = [(d["kind"], d["metadata"]["name"])
                  for path in (MANIFEST, ALL_NAMESPACES) for d in yaml.safe_load_all(path.read_text())
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
        if name != "flotilla-operator" or kind == "ClusterRole":  # no ClusterRoleBinding of its rights
            kube_env.kubectl("get", kind.lower(), name)
    kube_env.kubectl("get", "rolebinding", "flotilla-operator", "-n", "flotilla")
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
    missing, excess = operator_rbac.missing_and_excess(kube_env, "flotilla", ACCOUNT,
                                                       operator_rbac.NEEDED + operator_rbac.ELECTION)
    assert not missing, f"install/flotilla.yaml RBAC lacks {missing} in its namespace"
    assert not excess, f"install/flotilla.yaml RBAC grants {excess} in its namespace"
    # Cluster-scoped: it follows CRDs and may not change them.
    can = lambda *a: operator_rbac.can_i(kube_env, kube_namespace, ACCOUNT, *a)  # noqa: E731
    assert can("watch", "customresourcedefinitions.apiextensions.k8s.io")
    assert not can("delete", "customresourcedefinitions.apiextensions.k8s.io")
    assert not can("create", "customresourcedefinitions.apiextensions.k8s.io")
    # Secrets: it holds get/list/watch/create/update only to grant the brokers their SCRAM
    # credentials' Secret (Kubernetes forbids escalation); never delete or patch, anywhere.
    for verb in ("delete", "patch"):
        assert not operator_rbac.can_i_everywhere(kube_env, ACCOUNT, verb, "secrets")


def test_the_default_install_cannot_touch_another_namespace(kube_env, installed, kube_namespace):
    """Issue 38: no Secret read or written, no RoleBinding or Role created, nothing of what it does in
    its own namespace, in any other; and nothing granted across namespaces."""
    assert operator_rbac.granted_elsewhere(kube_env, kube_namespace, ACCOUNT) == []
    for verb, resource in operator_rbac.ELSEWHERE_FORBIDDEN:
        assert not operator_rbac.can_i_everywhere(kube_env, ACCOUNT, verb, resource), (verb, resource)
    # The control: in its own namespace the same questions are answered yes.
    forbidden = operator_rbac.ELSEWHERE_FORBIDDEN
    assert operator_rbac.allowed(kube_env, "flotilla", ACCOUNT, forbidden) == forbidden


@contextlib.contextmanager
def all_namespaces(kube_env):
    """install/flotilla-all-namespaces.yaml applied over the default install; afterwards back to the
    default as docs/operations.md says (apply it, delete the ClusterRoleBinding)."""
    kube_env.kubectl("apply", "--server-side", "-f", str(ALL_NAMESPACES))
    kube_env.kubectl("delete", "rolebinding", "flotilla-operator", "-n", "flotilla")
    try:
        yield
    finally:
        kube_env.kubectl("apply", "--server-side", "-f", str(MANIFEST))
        kube_env.kubectl("delete", "clusterrolebinding", "flotilla-operator", "--ignore-not-found")


def test_the_all_namespaces_install_may_do_it_in_every_namespace_and_switching_back_takes_it_away(
        kube_env, installed, kube_namespace):
    with all_namespaces(kube_env):
        args = json.loads(kube_env.kubectl("get", "deployment", "flotilla-operator", "-n", "flotilla", "-o",
                                           "json").stdout)["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--all-namespaces" in args and not [a for a in args if a.startswith("--namespace")]
        missing, excess = operator_rbac.missing_and_excess(kube_env, kube_namespace, ACCOUNT)
        assert not missing, f"install/flotilla-all-namespaces.yaml RBAC lacks {missing} in {kube_namespace}"
        assert not excess, f"install/flotilla-all-namespaces.yaml RBAC grants {excess} in {kube_namespace}"
        for verb, resource in operator_rbac.ELSEWHERE_FORBIDDEN:
            assert operator_rbac.can_i_everywhere(kube_env, ACCOUNT, verb, resource), (verb, resource)
        for verb in ("delete", "patch"):
            assert not operator_rbac.can_i_everywhere(kube_env, ACCOUNT, verb, "secrets")
    # Switched back: no Secrets or RoleBindings elsewhere again, and its own namespace's rights back.
    forbidden = operator_rbac.ELSEWHERE_FORBIDDEN
    assert operator_rbac.allowed(kube_env, kube_namespace, ACCOUNT, forbidden) == []
    assert operator_rbac.allowed(kube_env, "flotilla", ACCOUNT, forbidden) == forbidden
