"""A broker of one cluster cannot touch another cluster's metadata in a shared namespace (issue 23,
least privilege), on the test API server with crds/ (and its admission policies) installed.

The brokers' rights (operator builders/rbac.py: the flotilla-broker ClusterRole bound in their
namespace) cover every KafkaTopic and Lease of their namespace;
RBAC cannot say "only objects with my cluster label", so the ValidatingAdmissionPolicy
broker-own-cluster.flotilla.io does. Requests are made as the brokers' ServiceAccount
(`kubectl --as=system:serviceaccount:<ns>:<cluster>-broker`), with exactly the rights the operator
gives them, so a refusal here is the policy's, not RBAC's.

    pytest -m kube tests/e2e/test_broker_cluster_scope.py
"""

from __future__ import annotations

import json

import pytest

from flotilla_operator.builders.common import Owner
from flotilla_operator.builders.rbac import (build_metadata_role_binding, build_role, build_role_binding,
                                             build_service_account)
from flotilla.testenv.brokers.crds import install_crds
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(240),
              pytest.mark.flotilla_only("Kubernetes rights of a Flotilla fleet")]

CLUSTER = "flotilla.io/cluster"
LEASE_ROLE = "flotilla.io/lease"


def topic(name: str, cluster: str | None) -> dict:
    labels = {CLUSTER: cluster} if cluster else {}
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
            "metadata": {"name": name, "labels": labels}, "spec": {"partitions": 1}}


def lease(name: str, labels: dict[str, str]) -> dict:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "labels": labels}, "spec": {"holderIdentity": "x"}}


@pytest.fixture
def shared_namespace(kube_env, kube_namespace):
    """Cluster a's broker account and Role, and objects of clusters a and b (and of no cluster)."""
    install_crds(kube_env)
    owner = Owner(name="a", namespace=kube_namespace, uid="00000000-0000-0000-0000-00000000000a")
    objects = [build_service_account(owner), build_metadata_role_binding(owner), build_role(owner),
               build_role_binding(owner),
               topic("a-orders", "a"), topic("b-orders", "b"), topic("b-payments", "b"),
               lease("b-broker-1", {CLUSTER: "b", LEASE_ROLE: "broker"}),
               lease("a-broker-1", {CLUSTER: "a", LEASE_ROLE: "broker"}),
               # Another application's Leases: no cluster label, or Helm's instance label only.
               lease("other-app-leader", {}),
               lease("helm-app-leader", {"app.kubernetes.io/instance": "b"})]
    for obj in objects:   # no KafkaCluster here: an owner that does not exist would have the
        obj["metadata"].pop("ownerReferences", None)   # garbage collector delete them
    kube_env.kubectl("apply", "-n", kube_namespace, "-f", "-",
                     input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    # The brokers' rights, through the flotilla-broker ClusterRole installed with crds/.
    wait_for("cluster a's broker account to hold its metadata rights",
             lambda: kube_env.kubectl("auth", "can-i", "delete", "kafkatopics.flotilla.io", "-n", kube_namespace,
                                      f"--as=system:serviceaccount:{kube_namespace}:a-broker", check=False).stdout.strip()
             + " / " + kube_env.kubectl("get", "clusterrole", "flotilla-broker", "-o", "name", check=False).stdout.strip(),
             until=lambda v: v.startswith("yes"), timeout=60)
    return kube_namespace


def as_broker_of_a(kube_env, ns: str, *args: str, input: str | None = None):
    return kube_env.kubectl(f"--as=system:serviceaccount:{ns}:a-broker", "-n", ns, *args, input=input, check=False)


def refused(proc, what: str) -> None:
    assert proc.returncode != 0, f"{what} was allowed: {proc.stdout}"
    assert "broker-own-cluster.flotilla.io" in proc.stderr and "belongs to cluster b" in proc.stderr, proc.stderr


def test_a_broker_cannot_change_or_delete_another_clusters_topics_and_leases(kube_env, shared_namespace):
    ns = shared_namespace
    # Policies are enforced once the API server has loaded them: wait for the first refusal.
    proc = wait_for("the policy to refuse cluster a's broker deleting b's KafkaTopic",
                    lambda: as_broker_of_a(kube_env, ns, "delete", "kafkatopic", "b-orders", "--wait=false"),
                    until=lambda p: p.returncode != 0 and "broker-own-cluster" in p.stderr, timeout=60)
    assert "a broker of cluster a may not delete kafkatopics/b-orders, which belongs to cluster b" in proc.stderr

    refused(as_broker_of_a(kube_env, ns, "delete", "lease", "b-broker-1", "--wait=false"), "deleting b's Lease")
    refused(as_broker_of_a(kube_env, ns, "label", "kafkatopic", "b-payments", f"{CLUSTER}=a", "--overwrite"),
            "taking b's KafkaTopic over by its label")
    status = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic", "metadata": {"name": "b-payments"},
              "status": {"topicId": "AAAAAAAAAAAAAAAAAAAAAA"}}
    refused(as_broker_of_a(kube_env, ns, "patch", "kafkatopic", "b-payments", "--subresource=status",
                           "--type=merge", "-p", json.dumps({"status": status["status"]})),
            "writing b's KafkaTopic status")
    refused(as_broker_of_a(kube_env, ns, "create", "-f", "-", input=json.dumps(topic("b-new", "b"))),
            "creating a KafkaTopic for cluster b")
    # Nothing of b's changed.
    got = json.loads(kube_env.kubectl("get", "kafkatopic", "b-payments", "-n", ns, "-o", "json").stdout)
    assert got["metadata"]["labels"][CLUSTER] == "b" and "topicId" not in (got.get("status") or {})
    for kind, name in (("kafkatopic", "b-orders"), ("lease", "b-broker-1")):
        assert kube_env.kubectl("get", kind, name, "-n", ns, check=False).returncode == 0, f"{kind}/{name} is gone"


def test_a_broker_keeps_its_own_rights_and_other_applications_are_untouched(kube_env, shared_namespace):
    ns = shared_namespace
    wait_for("the policy to be in force",
             lambda: as_broker_of_a(kube_env, ns, "delete", "lease", "b-broker-1", "--wait=false"),
             until=lambda p: p.returncode != 0 and "broker-own-cluster" in p.stderr, timeout=60)
    # Its own cluster's objects: create, change, delete.
    ok = as_broker_of_a(kube_env, ns, "create", "-f", "-", input=json.dumps(topic("a-new", "a")))
    assert ok.returncode == 0, ok.stderr
    ok = as_broker_of_a(kube_env, ns, "annotate", "kafkatopic", "a-orders", "x=y")
    assert ok.returncode == 0, ok.stderr
    for kind, name in (("kafkatopic", "a-new"), ("lease", "a-broker-1")):
        ok = as_broker_of_a(kube_env, ns, "delete", kind, name, "--wait=false")
        assert ok.returncode == 0, f"{kind}/{name}: {ok.stderr}"
    # Leases of no cluster (another application's, even with Helm's instance label) are not ours to guard.
    for name in ("other-app-leader", "helm-app-leader"):
        ok = as_broker_of_a(kube_env, ns, "delete", "lease", name, "--wait=false")
        assert ok.returncode == 0, f"lease/{name}: {ok.stderr}"
    # Only the brokers' accounts are bound by it: an administrator deletes b's KafkaTopic.
    kube_env.kubectl("delete", "kafkatopic", "b-orders", "-n", ns, "--wait=false")
