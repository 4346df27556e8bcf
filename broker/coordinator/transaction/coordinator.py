"""The transaction coordinator (KIP-98), sharded by `__transaction_state` partition as the group
coordinator is by `__consumer_offsets`: the leader of partition p owns the transactional ids
hashed to p. A shard is loaded (its partition replayed) in the background when this broker
becomes its leader; its ids answer COORDINATOR_LOAD_IN_PROGRESS meanwhile and NOT_COORDINATOR
once leadership moves on. The leader epoch the shard was loaded at is the coordinator epoch
sent with markers.

Every state change is prepared by the pure state machine (state.py), appended to the shard's
partition and applied only once its in-sync replicas hold it (acks=all); a failed write leaves
the state as it was. EndTxn is answered once PrepareCommit/PrepareAbort is replicated; markers
are then sent in the background (markers.py) and CompleteCommit/CompleteAbort written after.
A new leader of a shard re-sends the markers of every transaction it finds prepared.

Transaction version 1 only (no epoch bump at each transaction end, KIP-890 part 2).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.coordinator.group.offsets_log import Appended, StoreError
from broker.coordinator.transaction import state as st
from broker.coordinator.transaction.markers import MarkerSender
from broker.coordinator.transaction.state import TxnError, TxnMetadata, TxnState
from broker.coordinator.transaction.txn_log import TOPIC, TransactionLog
from broker.metadata.store import MetadataError

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.coordinator.producer_ids import ProducerIdManager
    from broker.metadata.store import MetadataStore
    from broker.replica.partition_writer import PartitionWriter
    from broker.admin.topics import TopicManager

log = logging.getLogger(__name__)

WRITE_TIMEOUT_S = 30.0  # Kafka's transaction log append waits request.timeout.ms (30 s)
LOAD_YIELD_RECORDS = 2000
Partition = tuple[str, int]


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Stats:
    """Counts for /metrics (metrics.py)."""

    started: int = 0
    committed: int = 0
    aborted: int = 0
    timed_out: int = 0
    marker_rounds: int = 0
    marker_seconds: float = 0.0
    loads: int = 0
    load_seconds: float = 0.0


@dataclass
class Shard:
    index: int
    coordinator_epoch: int
    txns: dict[str, TxnMetadata] = field(default_factory=dict)


@dataclass
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


@dataclass
class TxnListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass
class TxnDescription:
    transactional_id: str
    error: ErrorCode
    state: str = ""
    timeout_ms: int = 0
    start_ms: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    partitions: dict[str, list[int]] = field(default_factory=dict)


class TransactionCoordinator:
    def __init__(self, *, config: "BrokerConfig", store: "MetadataStore", topics: "TopicManager",
                 writer: "PartitionWriter",
                 producer_ids: "ProducerIdManager", markers: MarkerSender) -> None:
        self.max_timeout_ms: int = config["transaction.max.timeout.ms"]
        self.expiration_ms: int = config["transactional.id.expiration.ms"]
        self.abort_interval_s = config["transaction.abort.timed.out.transaction.cleanup.interval.ms"] / 1000
        self.expire_interval_s = config["transaction.remove.expired.transaction.cleanup.interval.ms"] / 1000
        self.log = TransactionLog(config, store, topics, writer)
        self.writer, self.producer_ids, self.markers = writer, producer_ids, markers
        self.topics = topics
        self.shards: dict[int, Shard] = {}
        self._loading: dict[int, asyncio.Task] = {}
        self._tasks: set[asyncio.Task] = set()
        self.active = False
        self.stats = Stats()
        writer.on_leadership_change(self._on_leadership)

    # -- lifecycle -------------------------------------------------------------------------------
    async def start(self) -> None:
        self.active = True
        self._spawn(self._every(self.abort_interval_s, self.abort_timed_out), "txn-timeouts")
        self._spawn(self._every(self.expire_interval_s, self.expire_ids), "txn-id-expiry")

    async def stop(self) -> None:
        self.active = False
        tasks = list(self._loading.values()) + list(self._tasks)
        self._loading.clear()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.shards.clear()
        self.markers.close()

    async def ensure_topic(self, timeout_s: float = 30.0) -> None:
        """Create `__transaction_state` if needed and wait until the shards led here are loaded."""
        await self.log.ensure_topic()
        await self.topics.wait_for_image(self._all_led, timeout_s)
        await asyncio.sleep(0)
        await asyncio.wait_for(asyncio.gather(*self._loading.values(), return_exceptions=True), timeout_s)

    def _all_led(self, image) -> bool:
        record = image.topics.get(TOPIC)
        return (record is not None and record.assignment is not None
                and len(record.assignment) >= record.partitions and all(s.leader >= 0 for s in record.assignment))

    def _spawn(self, coro, name: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, interval_s: float, fn) -> None:
        while True:
            await asyncio.sleep(interval_s)
            try:
                await fn()
            except Exception:
                log.exception("%s failed", fn.__name__)

    # -- shards ----------------------------------------------------------------------------------
    def _on_leadership(self, topic: str, index: int, leading: bool) -> None:
        if topic != TOPIC:
            return
        self.log.refresh_partition_count()
        task = self._loading.pop(index, None)
        if task is not None:
            task.cancel()
        self.shards.pop(index, None)
        if leading:
            self._loading[index] = asyncio.get_running_loop().create_task(self._load_shard(index),
                                                                          name=f"load-{TOPIC}-{index}")
        else:
            log.info("transaction coordinator shard %s-%d unloaded", TOPIC, index)

    async def _load_shard(self, index: int) -> None:
        started = time.monotonic()
        part = self.log.leader_of(index)
        if part is None:
            self._loading.pop(index, None)
            return
        shard = Shard(index, part.leader_epoch)
        try:
            for n, (tid, transit) in enumerate(self.log.replay(part), 1):
                if n % LOAD_YIELD_RECORDS == 0:
                    await asyncio.sleep(0)
                if transit is None or transit.state == TxnState.DEAD:
                    shard.txns.pop(tid, None)
                else:
                    shard.txns[tid] = st.from_log(tid, transit)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("transaction coordinator shard %s-%d could not be loaded", TOPIC, index)
            return
        finally:
            if self._loading.get(index) is asyncio.current_task():
                del self._loading[index]
        self.shards[index] = shard
        self.stats.loads += 1
        self.stats.load_seconds += time.monotonic() - started
        prepared = [m for m in shard.txns.values() if m.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)]
        for m in prepared:  # what the last leader left half-done: finish it
            self._send_markers(shard, m)
        log.info("transaction coordinator shard %s-%d loaded at epoch %d: %d ids, %d to complete, in %.2fs",
                 TOPIC, index, shard.coordinator_epoch, len(shard.txns), len(prepared), time.monotonic() - started)

    def _shard_for(self, transactional_id: str) -> tuple[Shard | None, ErrorCode]:
        if not self.active:
            return None, ErrorCode.coordinator_not_available
        index = self.log.partition_for(transactional_id)
        if index in self._loading:
            return None, ErrorCode.coordinator_load_in_progress
        shard = self.shards.get(index)
        if shard is None:
            return None, ErrorCode.not_coordinator
        if not self._owns(shard):
            return None, ErrorCode.coordinator_load_in_progress if index in self._loading else ErrorCode.not_coordinator
        return shard, ErrorCode.none

    def _owns(self, shard: Shard) -> bool:
        """Still the shard's leader at the epoch it was loaded at. Led again at a newer epoch
        (another broker may have led in between): loaded afresh, as Kafka's onElection does."""
        if self.shards.get(shard.index) is not shard:
            return False
        part = self.log.leader_of(shard.index)
        if part is None:
            return False
        if part.leader_epoch != shard.coordinator_epoch:
            log.info("%s-%d: led at epoch %d now (loaded at %d): reloading", TOPIC, shard.index,
                     part.leader_epoch, shard.coordinator_epoch)
            self._on_leadership(TOPIC, shard.index, True)
            return False
        return True

    # -- writing ---------------------------------------------------------------------------------
    async def _write(self, shard: Shard, m: TxnMetadata, transit: st.Transit) -> ErrorCode:
        """Append the prepared transit, wait for the in-sync replicas, then apply it (or drop it)."""
        code = ErrorCode.none
        if not self._owns(shard):
            code = ErrorCode.not_coordinator
        else:
            part = self.log.leader_of(shard.index)
            try:
                appended = self.log.append(part, m.transactional_id,
                                           None if transit.state == TxnState.DEAD else transit)
            except StoreError as e:
                code = e.code
            else:
                code = await self._await_in_sync_replicas(appended)
        if code == ErrorCode.none and not self._owns(shard):
            code = ErrorCode.not_coordinator
        if code == ErrorCode.none:
            if transit.state == TxnState.ONGOING and m.state != TxnState.ONGOING:
                self.stats.started += 1
            m.complete(transit)
        elif m.pending == transit.state:
            m.abandon()
        return code

    async def _await_in_sync_replicas(self, appended: Appended) -> ErrorCode:
        code = await self.writer.wait_for_isr(appended.part, appended.leader_epoch, appended.end_offset,
                                              WRITE_TIMEOUT_S)
        if code == ErrorCode.none:
            return code
        if code in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
            return ErrorCode.not_coordinator
        return ErrorCode.coordinator_not_available  # too few in-sync replicas, timed out (Kafka's mapping)

    # -- InitProducerId --------------------------------------------------------------------------
    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected: tuple[int, int] | None = None) -> InitResult:
        if transactional_id == "":
            return InitResult(ErrorCode.invalid_request)
        if not st.valid_timeout(timeout_ms, self.max_timeout_ms):
            return InitResult(ErrorCode.invalid_transaction_timeout)
        shard, code = self._shard_for(transactional_id)
        if shard is None:
            return InitResult(code)
        m = shard.txns.get(transactional_id)
        if m is None:
            pid = await self._new_producer_id()
            if pid is None:
                return InitResult(ErrorCode.coordinator_load_in_progress)
            if not self._owns(shard):
                return InitResult(ErrorCode.not_coordinator)
            m = shard.txns.setdefault(transactional_id, TxnMetadata(
                transactional_id, pid, st.NO_PRODUCER_EPOCH, timeout_ms, TxnState.EMPTY, last_update_ms=now_ms()))
        new_pid = None
        if m.pending is None and st.needs_new_producer_id(m, None if expected is None else expected[1]):
            new_pid = await self._new_producer_id()
            if new_pid is None:
                return InitResult(ErrorCode.coordinator_load_in_progress)
        try:
            transit = st.prepare_init(m, timeout_ms, now_ms(), expected, new_pid)
        except TxnError as e:
            return InitResult(e.code)
        if transit.state == TxnState.PREPARE_EPOCH_FENCE:
            # An ongoing transaction: abort it first with the bumped epoch, and let the client retry.
            code = await self._end(shard, m, m.producer_id, transit.producer_epoch, commit=False, from_client=False)
            return InitResult(ErrorCode.concurrent_transactions if code == ErrorCode.none else code)
        code = await self._write(shard, m, transit)
        if code != ErrorCode.none:
            return InitResult(code)
        log.info("transactional id %s: producer id %d epoch %d", transactional_id, m.producer_id, m.producer_epoch)
        return InitResult(ErrorCode.none, m.producer_id, m.producer_epoch)

    async def _new_producer_id(self) -> int | None:
        try:
            return await self.producer_ids.next_id()
        except MetadataError as e:
            log.warning("no producer-id block from the cluster metadata: %s", e)
            return None

    # -- AddPartitionsToTxn / AddOffsetsToTxn ----------------------------------------------------
    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: set[Partition]) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        shard, code = self._shard_for(transactional_id)
        if shard is None:
            return code
        m = shard.txns.get(transactional_id)
        if m is None:
            return ErrorCode.invalid_producer_id_mapping
        try:
            transit = st.prepare_add_partitions(m, producer_id, epoch, partitions, now_ms())
        except TxnError as e:
            return e.code
        if transit is None:
            return ErrorCode.none
        return await self._write(shard, m, transit)

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: set[Partition]) -> dict[Partition, ErrorCode]:
        """AddPartitionsToTxn v4+ verify_only: is each partition in the ongoing transaction?"""
        if not transactional_id:
            return {p: ErrorCode.invalid_request for p in partitions}
        shard, code = self._shard_for(transactional_id)
        if shard is None:
            return {p: code for p in partitions}
        m = shard.txns.get(transactional_id)
        if m is None:
            return {p: ErrorCode.invalid_producer_id_mapping for p in partitions}
        try:
            return st.verify_partitions(m, producer_id, epoch, partitions)
        except TxnError as e:
            return {p: e.code for p in partitions}

    # -- EndTxn ----------------------------------------------------------------------------------
    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.invalid_request
        shard, code = self._shard_for(transactional_id)
        if shard is None:
            return code
        m = shard.txns.get(transactional_id)
        if m is None:
            return ErrorCode.invalid_producer_id_mapping
        return await self._end(shard, m, producer_id, epoch, commit, from_client=True)

    async def _end(self, shard: Shard, m: TxnMetadata, producer_id: int, epoch: int, commit: bool,
                   from_client: bool) -> ErrorCode:
        try:
            transit = st.prepare_end(m, producer_id, epoch, commit, now_ms(), from_client)
        except TxnError as e:
            if m.pending == TxnState.PREPARE_EPOCH_FENCE:
                m.abandon()
            return e.code
        if transit is None:
            return ErrorCode.none
        code = await self._write(shard, m, transit)
        if code != ErrorCode.none and not from_client:
            m.failed_epoch_fence = True  # the bumped epoch stays; a retry does not bump it again
        if code == ErrorCode.none:
            if commit:
                self.stats.committed += 1
            else:
                self.stats.aborted += 1
            self._send_markers(shard, m)
        return code

    def _send_markers(self, shard: Shard, m: TxnMetadata) -> None:
        self._spawn(self._complete(shard, m), f"txn-markers-{m.transactional_id}")

    async def _complete(self, shard: Shard, m: TxnMetadata) -> None:
        """Markers to every partition, then CompleteCommit/CompleteAbort (retried while we own
        the shard: a new leader does it otherwise)."""
        prepared = m.state
        commit = prepared == TxnState.PREPARE_COMMIT
        started = time.monotonic()
        done = await self.markers.send(m.producer_id, m.producer_epoch, commit, shard.coordinator_epoch,
                                       set(m.partitions), lambda: self._owns(shard) and m.state == prepared)
        if done:
            self.stats.marker_rounds += 1
            self.stats.marker_seconds += time.monotonic() - started
        backoff = 0.1
        while done and self._owns(shard) and m.state == prepared:
            if m.pending is None:
                code = await self._write(shard, m, st.prepare_complete(m, now_ms()))
                if code == ErrorCode.none:
                    log.info("transactional id %s: %s", m.transactional_id, m.state.kafka_name)
                    return
                log.info("transactional id %s: completing failed with %s; retrying", m.transactional_id, code.name)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 2.0)

    # -- timeouts and expiry ---------------------------------------------------------------------
    async def abort_timed_out(self) -> int:
        """Abort every ongoing transaction older than its timeout, fencing its producer (Kafka's
        abortTimedOutTransactions). Returns how many aborts started."""
        now = now_ms()
        started = 0
        for shard in list(self.shards.values()):
            for m in [m for m in shard.txns.values() if st.timed_out(m, now)]:
                if m.epoch_exhausted:
                    continue
                fence = st.prepare_fence(m, now)
                log.info("transactional id %s timed out after %d ms: aborting", m.transactional_id, m.timeout_ms)
                code = await self._end(shard, m, m.producer_id, fence.producer_epoch, commit=False, from_client=False)
                if code == ErrorCode.none:
                    started += 1
                    self.stats.timed_out += 1
        return started

    async def expire_ids(self) -> int:
        """Forget ids without a transaction for transactional.id.expiration.ms (a tombstone)."""
        now = now_ms()
        removed = 0
        for shard in list(self.shards.values()):
            for m in [m for m in shard.txns.values() if st.expired(m, now, self.expiration_ms)]:
                if await self._write(shard, m, st.prepare_dead(m, now)) == ErrorCode.none:
                    shard.txns.pop(m.transactional_id, None)
                    removed += 1
        return removed

    # -- administration (KIP-664) ----------------------------------------------------------------
    def list_transactions(self, states: set[str], producer_ids: set[int], min_duration_ms: int = -1
                          ) -> tuple[ErrorCode, list[TxnListing]]:
        if not self.active:
            return ErrorCode.coordinator_not_available, []
        now = now_ms()
        out = []
        for shard in self.shards.values():
            for m in shard.txns.values():
                if states and m.state.kafka_name not in states:
                    continue
                if producer_ids and m.producer_id not in producer_ids:
                    continue
                if min_duration_ms >= 0 and not (m.state == TxnState.ONGOING and now - m.start_ms >= min_duration_ms):
                    continue
                out.append(TxnListing(m.transactional_id, m.producer_id, m.state.kafka_name))
        error = ErrorCode.coordinator_load_in_progress if self._loading else ErrorCode.none
        return error, out

    def describe(self, transactional_id: str) -> TxnDescription:
        if not transactional_id:
            return TxnDescription(transactional_id, ErrorCode.invalid_request)
        shard, code = self._shard_for(transactional_id)
        if shard is None:
            return TxnDescription(transactional_id, code)
        m = shard.txns.get(transactional_id)
        if m is None or m.state == TxnState.DEAD:
            return TxnDescription(transactional_id, ErrorCode.transactional_id_not_found)
        parts: dict[str, list[int]] = {}
        for topic, index in sorted(m.partitions):
            parts.setdefault(topic, []).append(index)
        return TxnDescription(transactional_id, ErrorCode.none, m.state.kafka_name, m.timeout_ms, m.start_ms,
                              m.producer_id, m.producer_epoch, parts)
