"""The leader's view of its followers (Kafka's Partition.updateFollowerFetchState, maybeShrinkIsr,
maybeExpandIsr): followers' fetches move the high watermark, lagging followers leave the ISR and
caught-up ones rejoin it, each change written to the topic's metadata record (replica/isr_updates.py).
An ISR write whose outcome is unknown stays pending and is written again (issue 35)."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.replica import isr_updates
from broker.replica.leader_epoch_check import check_current_leader_epoch
from broker.replica.partition import Partition, _now_ms

if TYPE_CHECKING:
    from broker.metadata.store import PartitionState

log = logging.getLogger(__name__)

ISR_RETRY_MIN_S = 0.2  # first wait before writing an ISR change whose outcome was unknown again
ISR_RETRY_MAX_S = 2.0


class IsrMaintenance:
    """Part of ReplicaManager (replica/replica_manager.py), whose state it uses."""

    def follower_fetched(self, part: Partition, replica_id: int, fetch_offset: int, log_start_offset: int,
                         current_leader_epoch: int) -> ErrorCode:
        """A follower's fetch of a partition led here (Kafka's updateFollowerFetchState): its
        log end moves, maybe the high watermark, maybe it rejoins the ISR."""
        state = part.replica_state
        if state is None:
            return ErrorCode.not_leader_or_follower
        code = check_current_leader_epoch(max(current_leader_epoch, -1), part.leader_epoch)
        if code != ErrorCode.none:
            return code
        if replica_id not in state.followers:  # not a replica of this partition: as Kafka's followerReplicaOrThrow
            return ErrorCode.unknown_leader_epoch if current_leader_epoch >= 0 else ErrorCode.not_leader_or_follower
        leo = part.log.log_end_offset
        if fetch_offset > leo:
            return ErrorCode.offset_out_of_range
        previous_start = state.followers[replica_id].log_start_offset
        if state.update_follower(replica_id, fetch_offset, log_start_offset, leo, _now_ms(), self._isr_eligible):
            self._high_watermark_moved(part)
        if log_start_offset != previous_start:  # the low watermark may have moved (KIP-107)
            self.delete_records_purgatory.check_and_complete((part.topic, part.index))
        # A broker whose registration is not live (its Lease expired: fenced) or that is shutting
        # down may still fetch; adding it back would undo the controller, which removes it again:
        # a loop of writes.
        reg = self.store.image.brokers.get(replica_id)
        if replica_id not in state.isr and reg is not None and not reg.shutting_down:
            proposed = state.propose_expand(replica_id)
            if proposed is not None:
                self._write_isr(part, proposed, expand=True)
        return ErrorCode.none

    def _advance_high_watermark(self, part: Partition) -> None:
        state = part.replica_state
        if state is not None and state.maybe_increment_high_watermark(part.log.log_end_offset, _now_ms(),
                                                                      self._isr_eligible):
            self._high_watermark_moved(part)
        elif state is not None and part.log.high_watermark != state.high_watermark:
            part.log.high_watermark = min(state.high_watermark, part.log.log_end_offset)

    def _isr_eligible(self, broker_id: int) -> bool:
        """Whether a follower outside the ISR may count for the high watermark (Kafka's
        isReplicaIsrEligible): its broker is registered and not shutting down."""
        reg = self.store.image.brokers.get(broker_id)
        return reg is not None and not reg.shutting_down

    def _high_watermark_moved(self, part: Partition) -> None:
        part.log.high_watermark = min(part.replica_state.high_watermark, part.log.log_end_offset)
        tp = (part.topic, part.index)
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)

    def _replicas_from_image(self, part: Partition, state: PartitionState) -> None:
        """Replicas added to or removed from a partition led here at the same epoch (a
        reassignment, KIP-455): new followers may fetch; removed ones no longer hold the high
        watermark back."""
        log.info("%s-%d: replicas now %s", part.topic, part.index, list(state.replicas))
        part.replica_state.set_replicas(tuple(state.replicas))
        self._advance_high_watermark(part)

    def _isr_from_image(self, part: Partition, state: PartitionState) -> None:
        """The image's ISR for a partition still led here at the same epoch (the controller
        removed a broker whose Lease expired, or our own write came back)."""
        rs = part.replica_state
        if rs is not None and rs.pending_isr is None and frozenset(state.isr) != rs.isr:
            for removed in rs.isr - frozenset(state.isr):
                # Removed by the controller (its broker's Lease expired): it no longer counts as
                # caught up for the high watermark, as Kafka leaves fenced brokers out.
                follower = rs.followers.get(removed)
                if follower is not None:
                    follower.last_caught_up_time_ms = 0
            rs.isr_committed(frozenset(state.isr))
            self._advance_high_watermark(part)
            self.produce_purgatory.check_and_complete((part.topic, part.index))

    def _write_isr(self, part: Partition, isr: frozenset[int], expand: bool) -> None:
        base = part.replica_state.isr  # the ISR the proposal changes (isr_updates.recompute)
        task = asyncio.get_running_loop().create_task(self._isr_write(part, isr, base, expand), name="isr-write")
        self._isr_writes.add(task)
        task.add_done_callback(self._isr_writes.discard)

    async def _isr_write(self, part: Partition, isr: frozenset[int], base: frozenset[int], expand: bool) -> None:
        """Write an ISR change and settle the leader's state by its outcome. An unknown outcome
        (a timed-out write, a cut mid-write, a 5xx after commit) may be committed: the proposal
        stays pending, so the high watermark keeps counting the maximal ISR, and the same change
        is written again until the record shows what holds (Kafka's leader keeps a pending
        AlterPartition until the controller answers). Dropping it instead let the leader
        acknowledge acks=all without a follower the store already held in sync, and lose those
        records when that follower was elected (issue 35)."""
        rs = part.replica_state
        delay = ISR_RETRY_MIN_S
        while True:
            committed = await isr_updates.write_isr(self.store, part.topic, part.topic_id, part.index,
                                                    self.node_id, part.leader_epoch, isr, base)
            if part.replica_state is not rs or rs is None:
                return  # leadership moved meanwhile; the image rules
            if committed is not isr_updates.UNKNOWN:
                break
            if delay == ISR_RETRY_MIN_S:
                log.warning("%s-%d: the ISR change to %s has an unknown outcome; the high watermark counts "
                            "the maximal ISR %s until the metadata shows which ISR holds", part.topic,
                            part.index, sorted(isr), sorted(rs.maximal_isr))
            self.isr_writes_unknown += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, ISR_RETRY_MAX_S)
            if part.replica_state is not rs:
                return
        if committed is None:
            rs.isr_rejected()
            return
        if committed == isr:
            if expand:
                self.isr_expands += 1
            else:
                self.isr_shrinks += 1
            log.info("%s-%d: ISR %s %s", part.topic, part.index, "expanded to" if expand else "shrunk to",
                     sorted(committed))
        rs.isr_committed(committed)
        self._advance_high_watermark(part)
        self.produce_purgatory.check_and_complete((part.topic, part.index))

    def shrink_isrs(self) -> None:
        """Kafka's maybeShrinkIsr, over every partition led here: followers that have not caught
        up within replica.lag.time.max.ms leave the ISR (a CAS write of the topic's record)."""
        now = _now_ms()
        for part in list(self.partitions.values()):
            rs = part.replica_state
            if rs is None:
                continue
            proposed = rs.propose_shrink(part.log.log_end_offset, now)
            if proposed is not None:
                # The high watermark may move now (maximal ISR keeps it until the write lands).
                self._write_isr(part, proposed, expand=False)

    async def isr_expiration_loop(self) -> None:
        """Check for lagging followers every half replica.lag.time.max.ms, as Kafka does."""
        while True:
            await asyncio.sleep(self.max_lag_ms / 2000)
            try:
                self.shrink_isrs()
            except Exception:
                self._log_failure("ISR shrink")
