"""A long-poll fetch waiting in the purgatory until `min_bytes` can be returned (Kafka's DelayedFetch).

It is watched under the (topic, partition) key of every partition it reads; an append to one of
them checks that partition only. The bytes each partition could return are kept per partition and
recomputed, for the partition whose key fired, from its fetch offset and high watermark (nothing
to read while the watermark has not passed the fetch offset), so a session of 10,000 idle
partitions costs nothing per append to one of them.

A consumer's fetch of a partition this broker follows (KIP-392) waits the same way: the replica
fetcher checks the partition's key whenever the follower's high watermark or log start moves.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Hashable

from broker.replica.purgatory import DelayedOperation

if TYPE_CHECKING:
    from broker.apis.fetch_session import CachedPartition
    from broker.replica.replica_manager import ReplicaManager


class DelayedFetch(DelayedOperation):
    """Completes once the watched partitions hold `min_bytes` past their fetch offsets, or one of
    them can no longer be read from its fetch offset (deleted, truncated, moved past it)."""

    def __init__(self, replicas: "ReplicaManager", lookup: Callable[[tuple[str, int]], "CachedPartition | None"],
                 available: dict[tuple[str, int], int], min_bytes: int, replica: bool = False,
                 read_committed: bool = False, held_back: Callable[[tuple[str, int]], bool] | None = None,
                 any_replica: bool = False) -> None:
        super().__init__()
        # A consumer's Fetch v11+ (KIP-392): a partition this broker follows is read up to its high
        # watermark, and the fetch keeps waiting when a partition led here becomes a follower.
        self.any_replica = any_replica
        # A follower's partition the leader's replication throttle holds back counts no bytes (KIP-73).
        self.held_back = held_back
        self.read_committed = read_committed  # readable up to the last stable offset (KIP-98)
        self.replica = replica  # a follower's fetch: readable up to the log end, not the high watermark
        self.replicas = replicas
        self.lookup = lookup  # (topic, partition) -> what is fetched from it
        self.available = available  # (topic, partition) -> bytes readable now (only non-zero ones)
        self.accumulated = sum(available.values())
        self.min_bytes = min_bytes

    def can_complete(self, key: Hashable | None = None) -> bool:
        if key is not None:
            cp = self.lookup(key)  # type: ignore[arg-type]
            if cp is not None and self._update(key, cp):  # type: ignore[arg-type]
                return True
        return self.accumulated >= self.min_bytes

    def _update(self, key: tuple[str, int], cp: "CachedPartition") -> bool:
        """Recompute what `key` can return; True if the fetch must answer now (an error)."""
        part = self.replicas.partitions.get(key) if self.any_replica else self.replicas.get(*key)
        if part is None or (0 <= cp.current_leader_epoch != part.leader_epoch):
            return True  # no longer a replica here, or the consumer's epoch is fenced / unknown now
        log = part.log
        if cp.fetch_offset < log.log_start_offset or cp.fetch_offset > log.log_end_offset:
            return True
        size = 0
        upper = (log.log_end_offset if self.replica else
                 log.last_stable_offset if self.read_committed else log.high_watermark)
        if upper > cp.fetch_offset and not (self.held_back is not None and self.held_back(key)):
            if self.replica or self.read_committed:
                region = self.replicas.read(part, cp.fetch_offset, cp.max_bytes, min_one=True, upper_bound=upper)
            else:
                region = self.replicas.read(part, cp.fetch_offset, cp.max_bytes, min_one=True)
            size = min(region.length, cp.max_bytes) if region is not None else 0
        self.accumulated += size - self.available.get(key, 0)
        self.available[key] = size
        return False
