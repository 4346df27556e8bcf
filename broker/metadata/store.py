"""Cluster metadata: what topics exist, with which ids, partitions and configs.

The store interface follows the shape of Patroni's DCS layer: a small set of operations grouped
by the consistency they need, with interchangeable backends. Today there is the local-file
backend (a single broker: the embedded default); a Kubernetes backend (ConfigMaps/Leases with
resourceVersion as compare-and-set) comes with replication and plugs in behind the same methods.

  create-if-absent : create_topic        (fails with TopicExists if the name is taken)
  compare-and-set  : update_topic        (fails with Conflict if `version` moved on)
  delete           : delete_topic
  read             : topics(), topic(name)
"""

from __future__ import annotations

import abc
import uuid
from dataclasses import dataclass, field


NO_TOPIC_ID = uuid.UUID(int=0)  # what Kafka sends where a topic id is absent or unknown


class MetadataError(Exception):
    pass


class TopicExists(MetadataError):
    pass


class UnknownTopic(MetadataError):
    pass


class Conflict(MetadataError):
    """A compare-and-set lost: someone else changed the record first."""


@dataclass(frozen=True)
class TopicRecord:
    """One topic as the cluster knows it. `version` increases on every change (CAS token)."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    replication_factor: int = 1
    configs: dict[str, str] = field(default_factory=dict)
    version: int = 0

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


def new_topic(name: str, partitions: int, replication_factor: int = 1, configs: dict[str, str] | None = None) -> TopicRecord:
    return TopicRecord(name=name, topic_id=uuid.uuid4(), partitions=partitions,
                       replication_factor=replication_factor, configs=dict(configs or {}))


class MetadataStore(abc.ABC):
    """Where cluster metadata lives. Implementations must be safe to call from one event loop."""

    cluster_id: str

    @abc.abstractmethod
    def topics(self) -> dict[str, TopicRecord]: ...

    def topic(self, name: str) -> TopicRecord | None:
        return self.topics().get(name)

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicRecord | None:
        for t in self.topics().values():
            if t.topic_id == topic_id:
                return t
        return None

    @abc.abstractmethod
    def create_topic(self, topic: TopicRecord) -> TopicRecord:
        """Create-if-absent; raises TopicExists."""

    @abc.abstractmethod
    def update_topic(self, topic: TopicRecord) -> TopicRecord:
        """Compare-and-set on `topic.version`; raises Conflict or UnknownTopic. Returns the stored record."""

    @abc.abstractmethod
    def delete_topic(self, name: str) -> TopicRecord:
        """Remove a topic; raises UnknownTopic."""
