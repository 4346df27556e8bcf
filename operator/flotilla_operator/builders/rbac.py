"""The brokers' ServiceAccount and what they may do.

Least privilege: the brokers keep cluster metadata in their own namespace -- a Lease per broker
and the controller Lease (coordination.k8s.io), a KafkaTopic per topic (flotilla.io), and
their client quotas' ConfigMap, ACLs' ConfigMap and SCRAM credentials' Secret -- so that is all they get (broker/metadata/kube_store.py: get, list,
watch, create, update, delete, and updates of kafkatopics/status; patch for kubectl-style tooling).
Only their own cluster's Leases and KafkaTopics: the admission policy broker-own-cluster.flotilla.io
(api/admission_policies.py) refuses the rest.

Kubernetes lets nobody grant a permission it lacks, except by binding a role it may `bind`. So the
rules every cluster's brokers share (`BROKER_RULES`) are one ClusterRole, `flotilla-broker`,
installed with the CRDs, which each cluster's RoleBinding `<cluster>-broker-metadata` grants in its
own namespace: the operator holds `bind` on that ClusterRole, not write access to every Lease and
KafkaTopic of the cluster (kube-system's leader elections included). The per-cluster rules (ConfigMaps and a Secret
and the KafkaCluster, by name) stay in a Role, which the operator can grant because it
holds them (it reads KafkaClusters and writes ConfigMaps anyway; Secrets: get, list, watch, create,
update, never delete).
"""

from __future__ import annotations

from typing import Any

from broker.metadata import names

from .common import Owner, metadata, role_name, service_account_name

_RW = ["get", "list", "watch", "create", "update", "patch", "delete"]

BROKER_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": list(_RW)},
    {"apiGroups": ["flotilla.io"], "resources": ["kafkatopics"], "verbs": list(_RW)},
    # The brokers own a KafkaTopic's status (topic id, assignment), written through the subresource.
    {"apiGroups": ["flotilla.io"], "resources": ["kafkatopics/status"], "verbs": ["get", "update", "patch"]},
]


#: The ClusterRole holding BROKER_RULES (crds/flotilla.io_broker-clusterrole.yaml).
BROKER_CLUSTER_ROLE = "flotilla-broker"


def build_broker_cluster_role() -> dict[str, Any]:
    """Cluster-wide and the same for every cluster: rendered into crds/ (crd_render.py), not applied
    by the operator."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": BROKER_CLUSTER_ROLE, "labels": {"app.kubernetes.io/part-of": "flotilla"}},
        "rules": BROKER_RULES,
    }


def metadata_binding_name(owner: Owner) -> str:
    return names.metadata_binding_name(owner.name)


def build_metadata_role_binding(owner: Owner) -> dict[str, Any]:
    """BROKER_RULES for this cluster's brokers, in its namespace only."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(owner, metadata_binding_name(owner)),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": BROKER_CLUSTER_ROLE},
        "subjects": [{"kind": "ServiceAccount", "name": service_account_name(owner), "namespace": owner.namespace}],
    }


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
    name = names.client_quotas_name(owner.name)
    return [
        {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [name],
         "verbs": ["get", "list", "watch", "update"]},
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
    ]


def acl_rules(owner: Owner) -> list[dict[str, Any]]:
    """ACLs (authorizer.class.name) live in one ConfigMap per cluster (broker/metadata/kube_acls.py):
    the brokers read, watch and update that object by name (create is granted by
    client_quota_rules: it cannot be limited to a name); no other ConfigMap, and no delete."""
    return [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [names.acls_name(owner.name)],
             "verbs": ["get", "list", "watch", "update"]}]


def broker_config_rules(owner: Owner) -> list[dict[str, Any]]:
    """Dynamic broker configs (the KIP-73 replication throttle rates) live in one ConfigMap per
    cluster (broker/metadata/kube_broker_configs.py): read, watched and updated by name (create is
    granted by client_quota_rules); no other ConfigMap, and no delete."""
    return [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": [names.broker_configs_name(owner.name)],
             "verbs": ["get", "list", "watch", "update"]}]


def scram_credential_rules(owner: Owner) -> list[dict[str, Any]]:
    """SCRAM credentials (KIP-554: salted keys, never passwords) live in one Secret per cluster
    (broker/security/kube_scram_store.py): the brokers read, watch and update that one Secret by
    name, and may create it (create cannot be limited to a name); no other Secret, and no delete."""
    name = names.scram_credentials_name(owner.name)
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
        "rules": [*client_quota_rules(owner), *acl_rules(owner), *broker_config_rules(owner),
                  *scram_credential_rules(owner), *owner_rules(owner)],
    }


def build_role_binding(owner: Owner) -> dict[str, Any]:
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": metadata(owner, role_name(owner)),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(owner)},
        "subjects": [{"kind": "ServiceAccount", "name": service_account_name(owner), "namespace": owner.namespace}],
    }
