"""A partition held by this broker (`Partition`), the settings its log runs with, and Kafka's
effective min-ISR rule: what the replica manager and its parts share."""

from __future__ import annotations

import time
from dataclasses import dataclass

from broker import topic_config
from broker.config import BrokerConfig
from broker.controller.assignment import NO_LEADER
from broker.log.log import Log, LogConfig
from broker.replica.replica_state import LeaderReplicaState

TopicPartition = tuple[str, int]


@dataclass
class Partition:
    topic: str
    index: int
    topic_id: object
    log: Log
    leader_epoch: int = 0
    leader_id: int = NO_LEADER  # the leader in the image (this broker's id while it leads)
    # Set while this broker leads the partition: its followers and ISR (None on a follower).
    replica_state: LeaderReplicaState | None = None
    # The log end when this broker became leader at `leader_epoch` (Kafka's leaderEpochStartOffsetOpt):
    # until the high watermark reaches it, consumers get no `latest` (KIP-207). None on a follower.
    epoch_start_offset: int | None = None

    @property
    def is_leader(self) -> bool:
        return self.replica_state is not None


def log_config_for(config: BrokerConfig, topic_configs: dict[str, str]) -> LogConfig:
    """The settings in force for a topic: its own, else the broker's (see broker/topic_config.py)."""
    v = topic_config.in_force(config, topic_configs)
    flush_ms = int(v["flush.ms"])
    return LogConfig(
        segment_bytes=int(v["segment.bytes"]),
        segment_ms=int(v["segment.ms"]),
        retention_ms=int(v["retention.ms"]),
        retention_bytes=int(v["retention.bytes"]),
        flush_messages=int(v["flush.messages"]),
        flush_ms=None if flush_ms == topic_config.LONG_MAX else flush_ms,
        index_interval_bytes=int(v["index.interval.bytes"]),
        max_message_bytes=int(v["max.message.bytes"]),
        cleanup_policy=",".join(sorted(v["cleanup.policy"].split(","))),
        delete_retention_ms=int(v["delete.retention.ms"]),
        min_cleanable_dirty_ratio=float(v["min.cleanable.dirty.ratio"]),
        min_compaction_lag_ms=int(v["min.compaction.lag.ms"]),
        max_compaction_lag_ms=int(v["max.compaction.lag.ms"]),
        message_timestamp_type=v["message.timestamp.type"],
        message_timestamp_before_max_ms=int(v["message.timestamp.before.max.ms"]),
        message_timestamp_after_max_ms=int(v["message.timestamp.after.max.ms"]),
        min_insync_replicas=int(v["min.insync.replicas"]),
        producer_id_expiration_ms=config["producer.id.expiration.ms"],
    )


def effective_min_isr(part: Partition) -> int:
    """Kafka's effectiveMinIsr for a partition led here: min.insync.replicas, capped by the number
    of replicas. acks=all refuses a write (NOT_ENOUGH_REPLICAS) while the ISR is smaller, and
    answers NOT_ENOUGH_REPLICAS_AFTER_APPEND if it shrank below it meanwhile."""
    return min(part.log.config.min_insync_replicas, len(part.replica_state.replicas))


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"
