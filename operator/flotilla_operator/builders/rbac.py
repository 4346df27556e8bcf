"""The brokers' ServiceAccount, Role and RoleBinding.

Least privilege: the brokers keep cluster metadata in their own namespace -- a Lease per broker
and the controller Lease (coordination.k8s.io), a KafkaTopic per topic (flotilla.io), and
their client quotas' ConfigMap and SCRAM credentials' Secret -- so that is all they get (broker/metadata/kube_store.py: get, list,
watch, create, update, delete, and updates of kafkatopics/status; patch for kubectl-style tooling). The operator must itself hold every permission it grants here
(Kubernetes forbids escalation), and the chart's ClusterRole is written to match `BROKER_RULES`.
"""

from __future__ import annotations

from typing import Any

from .common import Owner, metadata, role_name, service_account_name

_RW = ["get", "list", "watch", "create", "update", "patch", "delete"]

BROKER_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": list(_RW)},
    {"apiGroups": ["flotilla.io"], "resources": ["kafkatopics"], "verbs": list(_RW)},
    # The brokers own a KafkaTopic's status (topic id, assignment), written through the subresource.
    {"apiGroups": ["flotilla.io"], "resources": ["kafkatopics/status"], "verbs": ["get", "update", "patch"]},
]


def build_service_account(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(owner, service_account_name(owner)),
        "automountServiceAccountToken": True,
    }


def client_quota_rules(owner: Owner) -> list[dict[str, Any]]:
    """Dynamic client quotas (KIP-13) live in one ConfigMap per cluster (broker/metadata/
    kube_quotas.py): the brokers read, watch and update that one object by name, and may create it
    (create cannot be limited to a name); no other ConfigMap, and no delete."""
    name = f"{owner.name}-client-quotas"
    return [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name],
         "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
    ]


def scram_credential_rules(owner: Owner) -> list[dict[str, Any]]:
    """SCRAM credentials (KIP-554: salted keys, never passwords) live in one Secret per cluster
    (broker/security/kube_scram_store.py): the brokers read, watch and update that one Secret by
    name, and may create it (create cannot be limited to a name); no other Secret, and no delete."""
    name = f"{owner.name}-scram-credentials"
    return [
        {"apiGroups": [""], "resources": ["secrets"], "resourceNames": [name],
         "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["create"]},
    ]


def owner_rules(owner: Owner) -> list[dict[str, Any]]:
    """Their own KafkaCluster, read only: a KafkaTopic it owns that is deleted is the topic's
    deletion only while the KafkaCluster stands (the garbage collector's, with the cluster, keeps
    the partitions on the kept volumes; broker/metadata/kube_store.py)."""
    return [{"apiGroups": ["flotilla.io"], "resources": ["kafkaclusters"], "resourceNames": [owner.name],
             "verbs": ["get"]}]


def build_role(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": metadata(owner, role_name(owner)),
        "rules": [*BROKER_RULES, *client_quota_rules(owner), *scram_credential_rules(owner), *owner_rules(owner)],
    }


def build_role_binding(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(owner, role_name(owner)),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(owner)},
        "subjects": [{"kind": "ServiceAccount", "name": service_account_name(owner), "namespace": owner.namespace}],
    }
