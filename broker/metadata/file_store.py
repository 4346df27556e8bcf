"""PROVISIONAL (branch cluster only): local-file backend in the agreed interface."""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from pathlib import Path

from broker.metadata.store import (BrokerRegistration, Conflict, MetadataImage, MetadataStore, PartitionState,
                                   TopicExists, TopicRecord, UnknownTopic)

FILE_NAME = "flotilla-metadata.json"
PRODUCER_ID_FILE = "producer-id-block"  # the end of the last block handed out


class FileMetadataStore(MetadataStore):
    def __init__(self, directory: Path, cluster_id: str) -> None:
        super().__init__()
        self.path = directory / FILE_NAME
        self.cluster_id = cluster_id
        topics: dict[str, TopicRecord] = {}
        if self.path.exists():
            doc = json.loads(self.path.read_text())
            for t in doc.get("topics", []):
                a = t.get("assignment")
                rec = TopicRecord(name=t["name"], topic_id=uuid.UUID(t["id"]), partitions=t["partitions"],
                                  replication_factor=t.get("replication_factor", 1),
                                  configs=t.get("configs", {}), version=t.get("version", 0),
                                  assignment=None if a is None else tuple(
                                      PartitionState(p["leader"], p["leader_epoch"], tuple(p["replicas"]), tuple(p["isr"]))
                                      for p in a))
                topics[rec.name] = rec
        self._brokers: dict[int, BrokerRegistration] = {}
        self._controller: int | None = None
        self.image = MetadataImage.build(cluster_id, {}, None, topics)

    def _save(self, topics) -> None:
        doc = {"version": 1, "cluster_id": self.cluster_id, "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
             "replication_factor": t.replication_factor, "configs": t.configs, "version": t.version,
             "assignment": None if t.assignment is None else [dataclasses.asdict(p) for p in t.assignment]}
            for t in sorted(topics.values(), key=lambda t: t.name)]}
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(doc, separators=(",", ":")))  # the C encoder: indent= is pure Python
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def _commit(self, topics) -> None:
        self._save(topics)
        self._publish(MetadataImage.build(self.cluster_id, self._brokers, self._controller, topics))

    async def register_broker(self, reg: BrokerRegistration) -> None:
        self._brokers[reg.node_id] = reg
        self._publish(MetadataImage.build(self.cluster_id, self._brokers, self._controller, self.image.topics))

    async def campaign(self, node_id: int) -> bool:
        if self._controller != node_id:
            self._controller = node_id
            self._publish(MetadataImage.build(self.cluster_id, self._brokers, self._controller, self.image.topics))
        return True

    def is_controller(self, node_id: int) -> bool:
        return self._controller == node_id

    async def create_topic(self, rec: TopicRecord) -> TopicRecord:
        if rec.name in self.image.topics:
            raise TopicExists(rec.name)
        stored = dataclasses.replace(rec, version=1)
        self._commit({**self.image.topics, rec.name: stored})
        return stored

    async def update_topic(self, rec: TopicRecord) -> TopicRecord:
        current = self.image.topics.get(rec.name)
        if current is None:
            raise UnknownTopic(rec.name)
        if current.version != rec.version:
            raise Conflict(f"topic {rec.name} is at version {current.version}, not {rec.version}")
        stored = dataclasses.replace(rec, version=rec.version + 1)
        self._commit({**self.image.topics, rec.name: stored})
        return stored

    async def delete_topic(self, name: str) -> TopicRecord:
        topics = dict(self.image.topics)
        current = topics.pop(name, None)
        if current is None:
            raise UnknownTopic(name)
        self._commit(topics)
        return current

    async def allocate_producer_ids(self, block_size: int) -> int:
        """One broker owns this file, so the compare-and-set is a durable write of the new end."""
        path = self.path.with_name(PRODUCER_ID_FILE)
        try:
            start = int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            start = 0
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{start + block_size}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return start
