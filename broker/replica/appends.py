"""The data path of a partition led here: append (a Produce, a transaction marker, a coordinator's
batch), wait until the in-sync replicas hold it (acks=all, `DelayedProduce` in the produce
purgatory: the one place that builds it, as Kafka's ReplicaManager.appendRecords does), and read."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.log.log import AppendResult, LogDirOffline, StorageError
from broker.log.segment import FileRegion
from broker.protocol.records import BatchHeader
from broker.replica.delayed_produce import DelayedProduce
from broker.replica.partition import Partition, TopicPartition


class Appends:
    """Part of ReplicaManager (replica/replica_manager.py), whose state it uses."""

    def append(self, part: Partition, payload: bytes, headers: list[BatchHeader],
               from_coordinator: bool = False) -> AppendResult:
        d = part.log.directory.parent
        if d in self.offline_dirs:
            raise LogDirOffline(f"{part.topic}-{part.index}: log directory {d} is offline ({self.offline_dirs[d]})")
        try:
            result = part.log.append(payload, headers, leader_epoch=part.leader_epoch,
                                     from_coordinator=from_coordinator)
        except StorageError as e:
            self.mark_offline(d, str(e), e)
            raise
        self._advance_high_watermark(part)
        self.fetch_purgatory.check_and_complete((part.topic, part.index))
        return result

    async def append_async(self, part: Partition, payload: bytes, headers: list[BatchHeader]) -> AppendResult:
        """Append for a Produce: the write happens now, and if the flush policy (flush.messages,
        flush.ms) says the data must be on disk, the answer waits for an fsync that runs in the
        storage threads, so the event loop serves everyone else meanwhile."""
        return await self._append_then_flush(part, lambda: part.log.append(
            payload, headers, leader_epoch=part.leader_epoch, flush_if_due=False))

    async def append_marker_async(self, part: Partition, producer_id: int, producer_epoch: int, commit: bool,
                                  coordinator_epoch: int) -> AppendResult:
        """Append a transaction's COMMIT/ABORT marker (WriteTxnMarkers), as append_async does a Produce."""
        return await self._append_then_flush(part, lambda: part.log.append_marker(
            producer_id, producer_epoch, commit, coordinator_epoch, leader_epoch=part.leader_epoch,
            flush_if_due=False))

    async def _append_then_flush(self, part: Partition, append) -> AppendResult:
        d = part.log.directory.parent
        if d in self.offline_dirs:
            raise LogDirOffline(f"{part.topic}-{part.index}: log directory {d} is offline ({self.offline_dirs[d]})")
        try:
            result = append()
            if part.log.flush_is_due():
                await part.log.flush_async()
        except OSError as e:
            err = StorageError(f"{part.topic}-{part.index}: flush failed: {e.strerror or e}")
            self.mark_offline(d, str(err), e)
            raise err from e
        except StorageError as e:
            self.mark_offline(d, str(e), e)
            raise
        self._advance_high_watermark(part)
        self.fetch_purgatory.check_and_complete((part.topic, part.index))
        return result

    def read(self, part: Partition, offset: int, max_bytes: int, min_one: bool,
             upper_bound: int | None = None) -> FileRegion | None:
        """Batches from `offset`: consumers read below the high watermark, followers (with
        `upper_bound` = the log end) everything the leader has."""
        bound = part.log.high_watermark if upper_bound is None else upper_bound
        return part.log.read(offset, max_bytes, upper_bound=bound, min_one=min_one)

    async def wait_for_isr(self, required: dict[TopicPartition, tuple[Partition, int, int]],
                           timeout_s: float) -> dict[TopicPartition, ErrorCode]:
        """acks=all: wait until the in-sync replicas hold what was appended, or `timeout_s` passes.
        `required`: (topic, partition) -> (the partition appended to, its leader epoch then, the
        offset the high watermark must reach). Answers per partition (replica/delayed_produce.py):
        NONE, NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT."""
        op = DelayedProduce(self, required)
        await self.produce_purgatory.wait(op, list(required), timeout_s)
        return {tp: op.results.get(tp, ErrorCode.request_timed_out) for tp in required}
