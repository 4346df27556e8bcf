"""A DeleteRecords waiting in the purgatory until every live replica dropped the records (Kafka's
DelayedDeleteRecords, KIP-107).

Each partition whose log start offset moved on the leader waits until the partition's low
watermark (the least log start offset over its live replicas: followers report theirs in every
fetch) reaches the requested offset. It is watched under the partition's (topic, partition) key,
which the replica manager checks when a follower's reported log start changes and when leadership
ends, and every key when brokers come or go. Answers, per partition:
- the low watermark reached the offset: NONE with the low watermark;
- this broker no longer leads it: NOT_LEADER_OR_FOLLOWER; it is no longer here at all:
  UNKNOWN_TOPIC_OR_PARTITION (both with low watermark -1);
- the request's timeout passed first: REQUEST_TIMED_OUT with the low watermark of when the
  deletion was done (decided by the caller).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Hashable

from kio.schema.errors import ErrorCode

from broker.replica.purgatory import DelayedOperation
from broker.replica.record_deletion import INVALID_LOW_WATERMARK, low_watermark

if TYPE_CHECKING:
    from broker.replica.replica_manager import ReplicaManager


class DelayedDeleteRecords(DelayedOperation):
    def __init__(self, replicas: "ReplicaManager", required: dict[tuple[str, int], int]) -> None:
        """`required`: (topic, partition) -> the offset the low watermark must reach."""
        super().__init__()
        self.replicas = replicas
        self.required = required
        self.results: dict[tuple[str, int], tuple[ErrorCode, int]] = {}  # (error, low watermark)

    def can_complete(self, key: Hashable | None = None) -> bool:
        keys = [key] if key is not None and key in self.required else list(self.required)
        for tp in keys:
            if tp not in self.results:
                self._check(tp)  # type: ignore[arg-type]
        return len(self.results) == len(self.required)

    def _check(self, tp: tuple[str, int]) -> None:
        part = self.replicas.partitions.get(tp)
        if part is None:
            self.results[tp] = (ErrorCode.unknown_topic_or_partition, INVALID_LOW_WATERMARK)
        elif part.replica_state is None:
            self.results[tp] = (ErrorCode.not_leader_or_follower, INVALID_LOW_WATERMARK)
        else:
            low = low_watermark(part, self.replicas.store.image.brokers)
            if low >= self.required[tp]:
                self.results[tp] = (ErrorCode.none, low)
