"""DeleteRecords on a partition's leader (KIP-107): the local step, before any waiting.

Kafka's Partition.deleteRecordsOnLeader and ReplicaManager.deleteRecordsOnLocalLog:
- internal topics are refused (INVALID_TOPIC_EXCEPTION), a topic whose cleanup.policy lacks
  `delete` too (POLICY_VIOLATION): deleting would break what compaction promises;
- offset -1 means the high watermark; a negative offset, or one past the high watermark, is
  OFFSET_OUT_OF_RANGE; otherwise the log start offset moves there (never back, so asking for less
  than the log start deletes nothing and succeeds);
- not led here: NOT_LEADER_OR_FOLLOWER; unknown: UNKNOWN_TOPIC_OR_PARTITION; a failed log dir:
  KAFKA_STORAGE_ERROR.
The result carries the offset the low watermark must reach and the low watermark now; the caller
checkpoints the log start offsets, then waits (replica/delayed_delete_records.py) if the low
watermark is below the offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.log.log import OffsetOutOfRange

if TYPE_CHECKING:
    from broker.replica.replica_manager import Partition, ReplicaManager

HIGH_WATERMARK = -1  # the offset that means "up to the high watermark"
INVALID_LOW_WATERMARK = -1  # the low watermark answered with an error
# Kafka's Topic.isInternal (a narrower set than every "__" name).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


@dataclass
class LocalDeletion:
    error: ErrorCode
    requested_offset: int = -1  # the offset the low watermark must reach
    low_watermark: int = INVALID_LOW_WATERMARK
    message: str | None = None
    part: "Partition | None" = None  # the partition whose log start moved (error none)


def low_watermark(part: "Partition", live_brokers) -> int:
    """The partition's low watermark, on its leader: the least log start offset over its live replicas."""
    state = part.replica_state
    assert state is not None, "low watermark asked of a partition not led here"
    return state.low_watermark(part.log.log_start_offset, live_brokers)


def delete_on_leader(replicas: "ReplicaManager", topic: str, partition: int, offset: int) -> LocalDeletion:
    """Advance the log start offset of `topic`-`partition` to `offset` if this broker leads it."""
    if topic in INTERNAL_TOPICS:
        return LocalDeletion(ErrorCode.invalid_topic_exception, message=f"cannot delete records of internal topic {topic}")
    part, code, _ = replicas.leader_or_error(topic, partition)
    if part is None:
        if code == ErrorCode.leader_not_available:  # Kafka: not hosted here as leader
            code = ErrorCode.not_leader_or_follower
        return LocalDeletion(code)
    lg = part.log
    if lg.directory.parent in replicas.offline_dirs:
        return LocalDeletion(ErrorCode.kafka_storage_error, message=f"log directory {lg.directory.parent} is offline")
    if "delete" not in lg.config.cleanup_policy.split(","):
        return LocalDeletion(ErrorCode.policy_violation,
                             message=f"records of {topic}-{partition} cannot be deleted: cleanup.policy={lg.config.cleanup_policy}")
    target = lg.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0:
        return LocalDeletion(ErrorCode.offset_out_of_range, message=f"offset {target} is not valid")
    try:
        lg.advance_log_start_offset(target)
    except OffsetOutOfRange as e:
        return LocalDeletion(ErrorCode.offset_out_of_range, message=str(e))
    return LocalDeletion(ErrorCode.none, target, low_watermark(part, replicas.store.image.brokers), part=part)
