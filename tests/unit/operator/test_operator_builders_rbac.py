"""The brokers' ServiceAccount, Role and RoleBinding."""

from pathlib import Path

import yaml

from flotilla_operator.builders.rbac import (BROKER_CLUSTER_ROLE, BROKER_RULES, build_metadata_role_binding,
                                             build_role, build_role_binding, build_service_account)

CRDS = Path(__file__).resolve().parents[3] / "crds"


def test_service_account(owner):
    sa = build_service_account(owner)
    assert sa["kind"] == "ServiceAccount" and sa["metadata"]["name"] == "demo-broker"


def test_role_is_least_privilege(owner):
    role = build_role(owner)
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "kafka"
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {("", "configmaps"), ("", "secrets"), ("flotilla.io", "kafkaclusters")}
    assert all("*" not in rule["verbs"] for rule in role["rules"])
    # ConfigMaps: only the cluster's client-quota and ACL objects by name, plus create; never delete
    cm = [r for r in role["rules"] if r["resources"] == ["configmaps"]]
    assert cm == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["demo-client-quotas"],
                   "verbs": ["get", "list", "watch", "update"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["demo-acls"],
                   "verbs": ["get", "list", "watch", "update"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["demo-broker-configs"],
                   "verbs": ["get", "list", "watch", "update"]}]
    # Secrets: only the cluster's SCRAM credentials by name, plus create; never delete
    assert [r for r in role["rules"] if r["resources"] == ["secrets"]] == [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["demo-scram-credentials"],
         "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]}]
    # Their own KafkaCluster, read only, by name (a deletion by the garbage collector keeps data).
    assert [r for r in role["rules"] if r["resources"] == ["kafkaclusters"]] == [
        {"apiGroups": ["flotilla.io"], "resources": ["kafkaclusters"], "resourceNames": ["demo"], "verbs": ["get"]}]


def test_role_binding(owner):
    rb = build_role_binding(owner)
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "demo-broker"}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "demo-broker", "namespace": "kafka"}]


def test_cluster_metadata_rights_come_from_the_shared_cluster_role(owner):
    rb = build_metadata_role_binding(owner)
    assert rb["kind"] == "RoleBinding" and rb["metadata"]["namespace"] == "kafka"
    assert rb["metadata"]["name"] == "demo-broker-metadata"
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": BROKER_CLUSTER_ROLE}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "demo-broker", "namespace": "kafka"}]
    # The ClusterRole installed with the CRDs holds exactly the brokers' shared rules.
    installed = yaml.safe_load((CRDS / "flotilla.io_broker-clusterrole.yaml").read_text())
    assert installed["kind"] == "ClusterRole" and installed["metadata"]["name"] == BROKER_CLUSTER_ROLE
    assert installed["rules"] == BROKER_RULES
    granted = {(g, r) for rule in installed["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {("coordination.k8s.io", "leases"), ("flotilla.io", "kafkatopics"), ("flotilla.io", "kafkatopics/status")}
