"""Names, labels and owner references shared by every builder. Pure: no I/O, no kopf."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from broker.metadata import names

from .. import API_VERSION

MANAGED_BY = "flotilla-operator"
# The cluster an object belongs to (the brokers' Leases and KafkaTopics, users' KafkaTopics, the
# operator's children). Ours: Helm and Argo CD's label tracking overwrite app.kubernetes.io/instance.
CLUSTER_LABEL = "flotilla.io/cluster"
# What named the cluster before flotilla.io/cluster. No longer read (issue 41), but by the one
# release's migration that labels the KafkaTopics that relied on it (builders/topic_labels.py).
LEGACY_CLUSTER_LABEL = "app.kubernetes.io/instance"
CONFIG_HASH_ANNOTATION = "flotilla.io/config-hash"
DATA_DIR = "/var/lib/flotilla/data"
CONFIG_DIR = "/etc/flotilla"
CONFIG_FILE = "server.properties"


# The operator's Kafka user on clusters whose bootstrap listener is SASL (clients/credentials.py).
OPERATOR_USER = "flotilla-operator"
# The brokers' own SCRAM-SHA-512 user on a SASL inter-broker listener (clients/credentials.py).
BROKER_USER = "flotilla-broker"
BROKER_PASSWORD_ENV = "FLOTILLA_BROKER_PASSWORD"


def sasl_inter_broker(spec: Any) -> bool:
    """Whether the brokers authenticate to each other: the first listener (the bootstrap and
    inter-broker one) is SASL_*."""
    return spec.listeners[0].protocol.startswith("SASL_")

@dataclass(frozen=True)
class Owner:
    """The KafkaCluster that owns the objects being built."""

    name: str
    namespace: str
    uid: str
    generation: int = 1

    @classmethod
    def from_body(cls, body: Any) -> Owner:
        meta = body["metadata"]
        return cls(
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta["uid"],
            generation=int(meta.get("generation") or 1),
        )


# Every derived name is broker/metadata/names.py's; these take the Owner the builders hold.
def statefulset_name(owner: Owner) -> str:
    return names.statefulset_name(owner.name)


def headless_service_name(owner: Owner) -> str:
    return names.headless_service_name(owner.name)


def bootstrap_service_name(owner: Owner) -> str:
    return names.bootstrap_service_name(owner.name)


def external_bootstrap_name(owner: Owner, port: int) -> str:
    return names.external_bootstrap_name(owner.name, port)


def external_broker_name(owner: Owner, ordinal: int | str, port: int) -> str:
    return names.external_broker_name(owner.name, ordinal, port)


def configmap_name(owner: Owner) -> str:
    return names.configmap_name(owner.name)


def service_account_name(owner: Owner) -> str:
    return names.service_account_name(owner.name)


def role_name(owner: Owner) -> str:
    return names.role_name(owner.name)


def pdb_name(owner: Owner) -> str:
    return names.pdb_name(owner.name)


def bootstrap_address(owner: Owner, port: int) -> str:
    return f"{bootstrap_service_name(owner)}.{owner.namespace}.svc:{port}"


def selector_labels(owner: Owner) -> dict[str, str]:
    """Labels that select the broker pods; never change them (a StatefulSet selector is immutable)."""
    return {
        "app.kubernetes.io/name": "flotilla",
        "app.kubernetes.io/instance": owner.name,
        "app.kubernetes.io/component": "broker",
    }


def cluster_of(obj: Any) -> str | None:
    """The cluster a KafkaTopic or Lease belongs to: its flotilla.io/cluster label, and nothing else
    (app.kubernetes.io/instance, which Helm and Argo CD set, no longer names one: issue 41)."""
    found = ((obj or {}).get("metadata") or {}).get("labels") or {}
    return found.get(CLUSTER_LABEL) or None


def cluster_selector(cluster: str, extra: str | None = None) -> str:
    """The label selector of a cluster's KafkaTopics or Leases (`extra`: more terms)."""
    return ",".join(term for term in (f"{CLUSTER_LABEL}={cluster}", extra) if term)


def parse_time(text: str | None) -> datetime | None:
    """An API timestamp (2026-12-07T12:00:00Z, with or without fractions); None if absent or unreadable."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def labels(owner: Owner) -> dict[str, str]:
    return {
        **selector_labels(owner),
        CLUSTER_LABEL: owner.name,
        "app.kubernetes.io/part-of": "flotilla",
        "app.kubernetes.io/managed-by": MANAGED_BY,
    }


def selector_string(owner: Owner) -> str:
    return ",".join(f"{k}={v}" for k, v in selector_labels(owner).items())


def owner_reference(owner: Owner) -> dict[str, Any]:
    """A controller owner reference: deleting the KafkaCluster garbage-collects the object."""
    return {
        "apiVersion": API_VERSION,
        "kind": "KafkaCluster",
        "name": owner.name,
        "uid": owner.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(owner: Owner, name: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": owner.namespace,
        "labels": labels(owner),
        "ownerReferences": [owner_reference(owner)],
        **extra,
    }


def foreign(existing: Any, owner: Owner) -> str | None:
    """Why an object already holding a child's name is not this cluster's to apply over (None when
    it is): applying would put our controller owner reference on it, and deleting the KafkaCluster
    would then delete an object the fleet never created. Ours: owned by this KafkaCluster (its uid)
    or by an earlier KafkaCluster of the same name, or carrying our managed-by and cluster labels
    with no controller (orphaned by such a one, e.g. `kubectl delete --cascade=orphan`)."""
    if not existing:
        return None
    meta = existing.get("metadata") or {}
    refs = meta.get("ownerReferences") or []
    if any(r.get("uid") == owner.uid for r in refs):
        return None
    kind, name = existing.get("kind", "object"), meta.get("name")
    controller = next((r for r in refs if r.get("controller")), None)
    if controller is not None and controller.get("kind") == "KafkaCluster" and controller.get("name") == owner.name:
        return None  # a predecessor of the same name, being garbage-collected: the apply says what it may
    if controller is not None:
        return f"{kind} {name} exists and is controlled by {controller.get('kind')} {controller.get('name')}"
    found = meta.get("labels") or {}
    if found.get("app.kubernetes.io/managed-by") == MANAGED_BY and cluster_of(existing) == owner.name:
        return None
    return (f"{kind} {name} exists and was not created by the operator for this KafkaCluster "
            "(it is left alone: rename the KafkaCluster, or delete or rename that object)")
