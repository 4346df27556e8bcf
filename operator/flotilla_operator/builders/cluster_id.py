"""Which Kafka `cluster.id` a fleet runs with, and the record that makes it outlive the KafkaCluster.

Every broker writes the id into meta.properties on its volume and refuses to start on a volume
of another id. Volumes are kept when a KafkaCluster is deleted (storage.deleteClaim: false), so a
re-created resource (a GitOps re-sync, a restore, an accidental delete) must render the same id,
or every broker refuses its own data. The id cannot come from the new object's uid; it is
recorded in a ConfigMap `<name>-cluster-id` that the KafkaCluster does not own (garbage
collection leaves it, as it leaves the claims, the KafkaTopics and the Leases) and that is
immutable (the API server refuses edits; only deleting it forgets the id).

Why a record rather than adopting the id from the volumes: the operator cannot read a claim
before a broker runs on it, brokers on empty volumes would each invent a different id, and a
restore into a new namespace has no volume to read until the pods start. A record is known
before any broker starts. `spec.clusterId` pins the id explicitly (a restore from backups, where
the record is gone too) and `status.clusterId` shows it.

Pure: the handler reads the record and passes it in; nothing here does I/O.
"""

from __future__ import annotations

import base64
import hashlib
import uuid
from dataclasses import dataclass
from typing import Any

from broker.metadata import names

from .common import Owner, labels

DATA_KEY = "cluster.id"


def record_name(owner: Owner) -> str:
    return names.cluster_id_name(owner.name)


def id_from_uid(owner: Owner) -> str:
    """A new fleet's id: the KafkaCluster's uid as 22 base64url characters, as Kafka writes a UUID
    (what every fleet got before the record existed, so running fleets keep theirs)."""
    try:
        raw = uuid.UUID(owner.uid).bytes
    except ValueError:
        raw = hashlib.sha256(owner.uid.encode()).digest()[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def recorded_id(record: dict[str, Any] | None) -> str | None:
    return ((record or {}).get("data") or {}).get(DATA_KEY) or None


@dataclass(frozen=True)
class ClusterIdChoice:
    cluster_id: str
    source: str  # spec, record, status or uid
    error: str | None = None  # set: refuse the spec, apply nothing

    @property
    def needs_record(self) -> bool:
        return self.source != "record"


def choose_cluster_id(owner: Owner, *, spec_id: str | None, record: dict[str, Any] | None,
                      status_id: str | None) -> ClusterIdChoice:
    """The id to render, in order: spec.clusterId, the record, status.clusterId (a record deleted
    under a running fleet), and for a new fleet the uid. A spec.clusterId that differs from the
    record is refused: the brokers' volumes hold the recorded id."""
    held = recorded_id(record)
    if spec_id:
        if held and held != spec_id:
            return ClusterIdChoice(held, "record", error=(
                f"spec.clusterId {spec_id} differs from the cluster id {held} recorded in ConfigMap "
                f"{record_name(owner)}, which the brokers' volumes hold; delete that ConfigMap (and the "
                f"brokers' claims) to start a new cluster"))
        return ClusterIdChoice(spec_id, "record" if held else "spec")
    if held:
        return ClusterIdChoice(held, "record")
    if status_id:
        return ClusterIdChoice(status_id, "status")
    return ClusterIdChoice(id_from_uid(owner), "uid")


def build_record(owner: Owner, cluster_id: str) -> dict[str, Any]:
    """The record: no ownerReference (it must survive the KafkaCluster) and immutable."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": record_name(owner),
            "namespace": owner.namespace,
            "labels": labels(owner),
            "annotations": {
                "flotilla.io/description": (
                    f"Kafka cluster.id of KafkaCluster {owner.name}: kept when the KafkaCluster is deleted so "
                    "that a re-created one finds its brokers' data; delete it only with the brokers' claims"),
            },
        },
        "immutable": True,
        "data": {DATA_KEY: cluster_id},
    }
