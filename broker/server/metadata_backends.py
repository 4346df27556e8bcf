"""Where the cluster metadata beside topics and brokers lives, matching the metadata store: in a
fleet (the Kubernetes store) the cluster's own ConfigMap or Secret, watched by every broker; beside
one broker, a file next to its metadata. The stores themselves do not know of each other."""

from __future__ import annotations

from pathlib import Path

from broker.metadata.acls import AclStore, FileAclStore
from broker.metadata.broker_configs import BrokerConfigStore, FileBrokerConfigStore
from broker.metadata.client_quotas import ClientQuotaStore, FileClientQuotaStore
from broker.metadata.store import MetadataStore
from broker.security.scram_store import FileScramCredentialStore, ScramCredentialStore


def _in_a_fleet(metadata_store: MetadataStore) -> bool:
    return metadata_store.shared_by_fleet


def open_acl_store(metadata_store, directory: Path) -> AclStore:
    """The ACLs (authorizer.class.name): the ConfigMap `<cluster>-acls`, or flotilla-acls.json."""
    if _in_a_fleet(metadata_store):
        from broker.metadata.kube_acls import KubernetesAclStore

        return KubernetesAclStore(metadata_store)
    return FileAclStore(directory)


def open_scram_store(metadata_store, directory: Path) -> ScramCredentialStore:
    """SCRAM credentials (KIP-554): the Secret `<cluster>-scram-credentials`, or a file."""
    if _in_a_fleet(metadata_store):
        from broker.metadata.kube_scram_store import KubernetesScramCredentialStore

        return KubernetesScramCredentialStore(metadata_store)
    return FileScramCredentialStore(directory)


def open_quota_store(metadata_store, directory: Path) -> ClientQuotaStore:
    """Dynamic client quotas (KIP-13): the ConfigMap `<cluster>-client-quotas`, or flotilla-quotas.json."""
    if _in_a_fleet(metadata_store):
        from broker.metadata.kube_quotas import KubernetesClientQuotaStore

        return KubernetesClientQuotaStore(metadata_store)
    return FileClientQuotaStore(directory)


def open_broker_config_store(metadata_store, directory: Path) -> BrokerConfigStore:
    """Dynamic broker configs (the replication throttle rates): the ConfigMap
    `<cluster>-broker-configs`, or flotilla-broker-configs.json."""
    if _in_a_fleet(metadata_store):
        from broker.metadata.kube_broker_configs import KubernetesBrokerConfigStore

        return KubernetesBrokerConfigStore(metadata_store)
    return FileBrokerConfigStore(directory)
