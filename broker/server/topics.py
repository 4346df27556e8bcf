"""Topic lifecycle shared by CreateTopics, DeleteTopics, CreatePartitions, Metadata's
auto-creation and the internal topics of coordinators: validate, record in the metadata
store, then open or remove logs."""

from __future__ import annotations

import dataclasses
import re

from kio.schema.errors import ErrorCode

from broker.config import BrokerConfig
from broker.metadata.store import MetadataStore, TopicRecord, new_topic
from broker.server.replica_manager import ReplicaManager

LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249

# Topic-level keys a CreateTopics request may set, with a validator each.
_INT_KEYS = {"retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "flush.messages", "flush.ms",
             "index.interval.bytes", "max.message.bytes", "min.insync.replicas", "delete.retention.ms",
             "min.compaction.lag.ms", "max.compaction.lag.ms", "file.delete.delay.ms", "segment.index.bytes",
             "message.timestamp.difference.max.ms", "local.retention.ms", "local.retention.bytes"}
_ENUM_KEYS = {"cleanup.policy": {"delete", "compact", "compact,delete", "delete,compact"},
              "compression.type": {"producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"},
              "message.timestamp.type": {"CreateTime", "LogAppendTime"}}
_OTHER_KEYS = {"unclean.leader.election.enable", "preallocate", "message.downconversion.enable",
               "min.cleanable.dirty.ratio", "remote.storage.enable", "segment.jitter.ms"}


class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise TopicError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.invalid_topic_exception, f"topic name is longer than {MAX_NAME_LENGTH} characters")
    if not LEGAL_NAME.match(name):
        raise TopicError(ErrorCode.invalid_topic_exception,
                         f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'")


def validate_topic_configs(configs: dict[str, str]) -> None:
    for k, v in configs.items():
        if k in _INT_KEYS:
            try:
                int(v)
            except (TypeError, ValueError):
                raise TopicError(ErrorCode.invalid_config, f"invalid value {v!r} for topic config {k!r}") from None
        elif k in _ENUM_KEYS:
            if v not in _ENUM_KEYS[k]:
                raise TopicError(ErrorCode.invalid_config, f"invalid value {v!r} for topic config {k!r}")
        elif k not in _OTHER_KEYS:
            raise TopicError(ErrorCode.invalid_config, f"unknown topic config {k!r}")


class TopicManager:
    def __init__(self, config: BrokerConfig, store: MetadataStore, replicas: ReplicaManager) -> None:
        self.config = config
        self.store = store
        self.replicas = replicas

    def check_create(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> tuple[int, int]:
        """Validate a creation request; returns the effective (partitions, replication factor)."""
        validate_topic_name(name)
        if self.store.topic(name) is not None:
            raise TopicError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        if partitions == -1:
            partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if partitions <= 0:
            raise TopicError(ErrorCode.invalid_partitions, f"number of partitions must be positive, got {partitions}")
        if replication_factor <= 0:
            raise TopicError(ErrorCode.invalid_replication_factor, f"replication factor must be positive, got {replication_factor}")
        if replication_factor > 1:
            raise TopicError(ErrorCode.invalid_replication_factor,
                             f"replication factor {replication_factor} is larger than the 1 available broker")
        validate_topic_configs(configs)
        return partitions, replication_factor

    def create(self, name: str, partitions: int = -1, replication_factor: int = -1,
               configs: dict[str, str] | None = None) -> TopicRecord:
        configs = dict(configs or {})
        partitions, replication_factor = self.check_create(name, partitions, replication_factor, configs)
        try:
            record = self.store.create_topic(new_topic(name, partitions, replication_factor, configs))
            self.replicas.create_logs(record)
        except OSError as e:
            raise TopicError(ErrorCode.kafka_storage_error, f"cannot create topic {name!r}: {e.strerror}") from e
        return record

    def ensure(self, name: str, partitions: int, configs: dict[str, str] | None = None) -> TopicRecord:
        """Create an internal topic if it does not exist yet (coordinators' own topics)."""
        existing = self.store.topic(name)
        if existing is not None:
            self.replicas.create_logs(existing)
            return existing
        record = self.store.create_topic(new_topic(name, partitions, 1, configs))
        self.replicas.create_logs(record)
        return record

    def delete(self, name: str) -> TopicRecord:
        if not self.config["delete.topic.enable"]:
            raise TopicError(ErrorCode.topic_deletion_disabled, "delete.topic.enable is false")
        record = self.store.topic(name)
        if record is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        try:
            self.store.delete_topic(name)
            self.replicas.delete_logs(name)
        except OSError as e:
            raise TopicError(ErrorCode.kafka_storage_error, f"cannot delete topic {name!r}: {e.strerror}") from e
        return record

    def add_partitions(self, name: str, total: int, validate_only: bool = False) -> TopicRecord:
        record = self.store.topic(name)
        if record is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        if total < record.partitions:
            raise TopicError(ErrorCode.invalid_partitions,
                             f"topic {name!r} has {record.partitions} partitions; cannot reduce to {total}")
        if total == record.partitions:
            raise TopicError(ErrorCode.invalid_partitions, f"topic {name!r} already has {total} partitions")
        if validate_only:
            return record
        try:
            updated = self.store.update_topic(dataclasses.replace(record, partitions=total))
            self.replicas.create_logs(updated)
        except OSError as e:
            raise TopicError(ErrorCode.kafka_storage_error, f"cannot add partitions to {name!r}: {e.strerror}") from e
        return updated
