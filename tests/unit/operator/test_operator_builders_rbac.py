"""The brokers' ServiceAccount, Role and RoleBinding."""

from flotilla_operator.builders.rbac import BROKER_RULES, build_role, build_role_binding, build_service_account


def test_service_account(owner):
    sa = build_service_account(owner)
    assert sa["kind"] == "ServiceAccount" and sa["metadata"]["name"] == "demo-broker"


def test_role_is_least_privilege(owner):
    role = build_role(owner)
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "kafka"
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert granted == {("coordination.k8s.io", "leases"), ("flotilla.io", "kafkatopics"), ("flotilla.io", "kafkatopics/status"),
                       ("", "configmaps"), ("", "secrets"), ("flotilla.io", "kafkaclusters")}
    assert all("*" not in rule["verbs"] for rule in role["rules"])
    assert role["rules"][:len(BROKER_RULES)] == BROKER_RULES
    # ConfigMaps: only the cluster's client-quota object by name, plus create; never delete
    cm = [r for r in role["rules"] if r["resources"] == ["configmaps"]]
    assert cm == [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["demo-client-quotas"],
                   "verbs": ["get", "list", "watch", "update"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]}]
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
