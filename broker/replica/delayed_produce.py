"""An acks=all Produce waiting in the purgatory until the ISR has its batches (Kafka's DelayedProduce).

Each partition the request appended to waits until the leader's high watermark passes the end of
what was appended there; it is watched under that partition's (topic, partition) key, which the
replica manager checks whenever the partition's high watermark moves, its ISR changes or its
leadership ends. Kafka's answers:
- the high watermark passed the batch and the ISR still has min.insync.replicas members: done;
- it passed, but the ISR shrank below min.insync.replicas meanwhile: NOT_ENOUGH_REPLICAS_AFTER_APPEND
  (the records are in the log; a retry may duplicate them unless the producer is idempotent);
- this broker stopped leading the partition, or its Lease may have lapsed while an in-sync
  follower stopped fetching (another leader may have been elected, ReplicaManager.writes_fenced):
  NOT_LEADER_OR_FOLLOWER;
- the request's timeout passed first: REQUEST_TIMED_OUT (decided by the caller).
"""

from __future__ import annotations

from typing import Hashable, Protocol

from kio.schema.errors import ErrorCode

from broker.replica.partition import Partition, effective_min_isr
from broker.replica.purgatory import DelayedOperation


class Leaders(Protocol):
    """What a DelayedProduce reads of the replica manager (replica/replica_manager.py)."""

    def get(self, topic: str, partition: int) -> Partition | None: ...

    def writes_fenced(self, part: Partition) -> bool: ...


class DelayedProduce(DelayedOperation):
    def __init__(self, replicas: Leaders, required: dict[tuple[str, int], tuple[object, int, int]]) -> None:
        """`required`: (topic, partition) -> (the partition object appended to, its leader epoch,
        the offset the high watermark must reach: the last appended offset + 1)."""
        super().__init__()
        self.replicas = replicas
        self.required = required
        self.results: dict[tuple[str, int], ErrorCode] = {}

    def can_complete(self, key: Hashable | None = None) -> bool:
        keys = [key] if key is not None and key in self.required else list(self.required)
        for tp in keys:
            if tp not in self.results:
                self._check(tp)  # type: ignore[arg-type]
        return len(self.results) == len(self.required)

    def _check(self, tp: tuple[str, int]) -> None:
        part, epoch, offset = self.required[tp]
        current = self.replicas.get(*tp)
        state = current.replica_state if current is not None else None
        if (current is not part or state is None or current.leader_epoch != epoch
                or self.replicas.writes_fenced(current)):
            self.results[tp] = ErrorCode.not_leader_or_follower
            return
        min_isr = effective_min_isr(current)
        done, enough = state.enough_replicas_reached(offset, min_isr)
        if done:
            self.results[tp] = ErrorCode.none if enough else ErrorCode.not_enough_replicas_after_append
