"""Cluster metadata behind a small store interface (see store.py)."""

from __future__ import annotations

from pathlib import Path

from broker.config import BrokerConfig
from broker.metadata.store import MetadataStore


def open_store(config: BrokerConfig, cluster_id: str, directory: Path) -> MetadataStore:
    """The backend the configuration asks for (the local file backend today)."""
    from broker.metadata.file_store import FileMetadataStore

    return FileMetadataStore(directory, cluster_id)
