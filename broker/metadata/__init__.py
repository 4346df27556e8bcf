"""Cluster metadata behind a small store interface (see store.py)."""

from __future__ import annotations

from pathlib import Path

from broker.config import BrokerConfig
from broker.metadata.store import MetadataStore


def open_store(config: BrokerConfig, cluster_id: str, directory: Path) -> MetadataStore:
    """The backend `flotilla.metadata.store` names: the local file in `directory` (one broker), or
    Leases and KafkaTopics on the Kubernetes API (a fleet). Call `await store.start()` next."""
    lease_s = config["flotilla.metadata.lease.duration.ms"] / 1000
    if config["flotilla.metadata.store"] == "kubernetes":
        from broker.metadata.kube_store import KubernetesMetadataStore

        return KubernetesMetadataStore(
            cluster_id=cluster_id, cluster_name=config["flotilla.cluster.name"],
            namespace=config["flotilla.kubernetes.namespace"] or None, lease_duration_s=lease_s,
            default_partitions=config["num.partitions"],
            default_replication_factor=config["default.replication.factor"],
            delete_topic_enable=config["delete.topic.enable"],
            owner_uid=config["flotilla.cluster.uid"] or None)
    from broker.metadata.file_store import FileMetadataStore

    return FileMetadataStore(directory, cluster_id)
