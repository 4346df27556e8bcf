"""Local-file metadata backend: the embedded default for a single broker outside Kubernetes.

The whole image is one small JSON document in the first log directory, replaced atomically
(write, fsync, rename) on every change, so a crash leaves the old or the new version.
"""

from __future__ import annotations

import dataclasses
import json
import os
import uuid
from pathlib import Path

from broker.metadata.store import Conflict, MetadataStore, TopicExists, TopicRecord, UnknownTopic

FILE_NAME = "flotilla-metadata.json"


class FileMetadataStore(MetadataStore):
    def __init__(self, directory: Path, cluster_id: str) -> None:
        self.path = directory / FILE_NAME
        self.cluster_id = cluster_id
        self._topics: dict[str, TopicRecord] = {}
        if self.path.exists():
            doc = json.loads(self.path.read_text())
            for t in doc.get("topics", []):
                rec = TopicRecord(name=t["name"], topic_id=uuid.UUID(t["id"]), partitions=t["partitions"],
                                  replication_factor=t.get("replication_factor", 1),
                                  configs=t.get("configs", {}), version=t.get("version", 0))
                self._topics[rec.name] = rec

    def _save(self) -> None:
        doc = {"version": 1, "cluster_id": self.cluster_id, "topics": [
            {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
             "replication_factor": t.replication_factor, "configs": t.configs, "version": t.version}
            for t in sorted(self._topics.values(), key=lambda t: t.name)]}
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)

    def topics(self) -> dict[str, TopicRecord]:
        return dict(self._topics)

    def create_topic(self, topic: TopicRecord) -> TopicRecord:
        if topic.name in self._topics:
            raise TopicExists(topic.name)
        stored = dataclasses.replace(topic, version=1)
        self._topics[topic.name] = stored
        try:
            self._save()
        except OSError:
            del self._topics[topic.name]
            raise
        return stored

    def update_topic(self, topic: TopicRecord) -> TopicRecord:
        current = self._topics.get(topic.name)
        if current is None:
            raise UnknownTopic(topic.name)
        if current.version != topic.version:
            raise Conflict(f"topic {topic.name} is at version {current.version}, not {topic.version}")
        stored = dataclasses.replace(topic, version=topic.version + 1)
        self._topics[topic.name] = stored
        try:
            self._save()
        except OSError:
            self._topics[topic.name] = current
            raise
        return stored

    def delete_topic(self, name: str) -> TopicRecord:
        current = self._topics.pop(name, None)
        if current is None:
            raise UnknownTopic(name)
        self._save()
        return current
