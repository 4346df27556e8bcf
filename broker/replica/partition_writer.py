"""What a coordinator sees of the partitions of its internal topic (Kafka's coordinator-common
PartitionWriter): the partition if it is led here, an append, a wait until the in-sync replicas
hold what was appended, the high watermark, and word when leadership comes or goes. The group
and transaction coordinators (broker/coordinator/) reach the replica layer through this only."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from kio.schema.errors import ErrorCode

from broker.log.log import AppendResult
from broker.protocol.records import BatchHeader
from broker.replica.partition import Partition

if TYPE_CHECKING:
    from broker.replica.replica_manager import ReplicaManager


class PartitionWriter:
    def __init__(self, replicas: "ReplicaManager") -> None:
        self._replicas = replicas

    def leader(self, topic: str, index: int) -> Partition | None:
        """The partition if this broker leads it, else None."""
        return self._replicas.get(topic, index)

    def on_leadership_change(self, callback: Callable[[str, int, bool], None]) -> None:
        """callback(topic, partition, leading) after a partition is opened or closed here."""
        self._replicas.on_leadership_change(callback)

    def append(self, part: Partition, payload: bytes, headers: list[BatchHeader],
               from_coordinator: bool = False) -> AppendResult:
        """Append a validated batch to a partition led here (raises the log's errors)."""
        return self._replicas.append(part, payload, headers, from_coordinator=from_coordinator)

    async def wait_for_isr(self, part: Partition, leader_epoch: int, end_offset: int, timeout_s: float) -> ErrorCode:
        """Until the in-sync replicas hold the log up to `end_offset` as appended at `leader_epoch`:
        NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT."""
        tp = (part.topic, part.index)
        return (await self._replicas.wait_for_isr({tp: (part, leader_epoch, end_offset)}, timeout_s))[tp]

    @staticmethod
    def high_watermark(part: Partition) -> int:
        return part.log.high_watermark
