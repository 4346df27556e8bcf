"""Followers copy their leaders' logs (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

One fetcher task per leader broker serves every partition this broker follows from it, over one
Kafka-protocol connection to the leader's inter-broker listener (its endpoint from the broker's
registration). It speaks the protocol any Kafka broker would:

- After a leader change, before fetching a partition, it asks the leader OffsetForLeaderEpoch for
  the latest epoch in its own log and truncates where `truncation.truncation_state` says: to
  min(the leader's end of the answered epoch, its own end of it) when it holds that epoch, else
  part-way to its own end of the epoch below and asks again, until the logs agree (KIP-101/279);
  a log without epochs truncates to its high watermark.
- Fetch v15 with ReplicaState = this broker's id and broker epoch (KIP-903: the leader accepts
  it only from a live registration in its current incarnation, `follower_identity`), topic ids,
  isolation_level 0 and each partition's current_leader_epoch, in one KIP-227 session
  (privileged at the leader: never evicted for a consumer's): after the first full fetch each
  request names only partitions whose fetch offset, epoch or log start moved, and forgets those
  no longer followed from this leader.
- The leader's batches are appended as they are (`Log.append_as_follower`, offsets and epochs
  kept); the follower's high watermark becomes min(the leader's, its own log end) and its log
  start follows the leader's (DeleteRecords, retention); consumers' fetches parked here (KIP-392,
  fetch from follower) are checked when either moves.
- A fenced or unknown epoch, or NOT_LEADER_OR_FOLLOWER, means the image has moved or is about to:
  the partition is retried after a back-off and re-planned when the image changes.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
import time
import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v15 import request as fetch_v15
from kio.schema.list_offsets.v7 import request as list_offsets_v7
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_v4
from kio.static.primitive import i32, i64

from broker.config import BrokerConfig
from broker.log.log import LogError
from broker.network.client import AuthenticationFailed, ClientError, KafkaConnection
from broker.protocol.records import whole_batches_size
from broker.security.inter_broker_client import inter_broker_client
from broker.metadata import cluster_view
from broker.replica import follower_identity
from broker.protocol.fetch_session_ids import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from broker.replica.replica_manager import ReplicaManager, TopicPartition
from broker.replica.truncation import truncation_state

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
RETRY_PARTITION_S = 0.2  # a partition the leader refused (it has not seen the new epoch yet)
STOP_TIMEOUT_S = 5.0  # shutdown waits this long for the fetchers to end
LATEST_TIMESTAMP, EARLIEST_TIMESTAMP = -1, -2  # ListOffsets: the leader's log end and log start


@dataclass
class Followed:
    """One partition followed from this fetcher's leader."""

    leader_epoch: int
    truncated: bool = False  # OffsetForLeaderEpoch done for this epoch
    out_of_range: bool = False  # the leader refused the fetch offset: ask its log end and start
    retry_at: float = 0.0  # monotonic time before which it is not asked for


class ReplicaFetcher:
    """Fetches every partition this broker follows from one leader."""

    def __init__(self, manager: "ReplicaFetcherManager", leader_id: int) -> None:
        self.manager = manager
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, Followed] = {}
        self.conn: KafkaConnection | None = None
        self.session_id = INVALID_SESSION_ID
        self.session_epoch = INITIAL_EPOCH
        self.sent: dict[TopicPartition, tuple[int, int, int]] = {}  # what the leader's session holds
        self.topic_ids: dict[str, uuid.UUID] = {}  # of the topics named in this session (Fetch v13+)
        self.changed = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.fetches = 0

    # -- what to fetch -------------------------------------------------------------------------
    def set_partitions(self, wanted: dict[TopicPartition, int]) -> None:
        """{tp: leader epoch}: new partitions, or ones at a new epoch, truncate first."""
        for tp in [tp for tp in self.partitions if tp not in wanted]:
            del self.partitions[tp]
        for tp, epoch in wanted.items():
            f = self.partitions.get(tp)
            if f is None or f.leader_epoch != epoch:
                self.partitions[tp] = Followed(epoch)
        self.changed.set()

    # -- the loop ----------------------------------------------------------------------------
    async def run(self) -> None:
        rm = self.manager.replicas
        backoff = self.manager.config["replica.fetch.backoff.ms"] / 1000
        failing = False  # the same failure is logged once, not every back-off
        while self.manager.running:  # also ends a loop whose cancellation was lost in a wait_for
            try:
                if not self.partitions:
                    self.changed.clear()
                    await self.changed.wait()
                    continue
                if self.conn is None:
                    await self._connect()
                await self._truncate(rm)
                await self._reset_out_of_range(rm)
                fetched = await self._fetch(rm)
                failing = False
                if not fetched:
                    self.changed.clear()
                    try:
                        await asyncio.wait_for(self.changed.wait(), RETRY_PARTITION_S)
                    except asyncio.TimeoutError:
                        pass
            except asyncio.CancelledError:
                raise
            except ClientError as e:
                level = logging.ERROR if isinstance(e, AuthenticationFailed) else logging.INFO
                log.log(logging.DEBUG if failing else level,
                        "replica fetcher for leader %d: %s; retrying every %.1fs", self.leader_id, e, backoff)
                failing = True
                self._reset()
                await asyncio.sleep(backoff)
            except Exception:
                log.exception("replica fetcher for leader %d failed; retrying in %.1fs", self.leader_id, backoff)
                self._reset()
                await asyncio.sleep(backoff)

    def _reset(self) -> None:
        if self.conn is not None:
            self.conn.close()
        self.conn = None
        self._reset_session()

    def _reset_session(self) -> None:
        self.session_id, self.session_epoch, self.sent = INVALID_SESSION_ID, INITIAL_EPOCH, {}
        self.topic_ids = {}

    async def _connect(self) -> None:
        image = self.manager.replicas.store.image
        address = cluster_view.node_address(image, self.leader_id, self.manager.listener)
        if address is None:
            raise ClientError(f"broker {self.leader_id} is not registered")
        conn = KafkaConnection(address.host, address.port, f"flotilla-replica-fetcher-{self.manager.node_id}",
                               self.manager.security)
        await conn.connect(CONNECT_TIMEOUT_S)
        self.conn = conn
        self._reset_session()

    # -- truncation (KIP-101/279) ------------------------------------------------------------
    async def _truncate(self, rm: ReplicaManager) -> None:
        """OffsetForLeaderEpoch rounds until every due partition's log agrees with the leader's
        (broker/replica/truncation.py); a log that diverged in several epochs takes several."""
        while await self._truncate_round(rm):
            pass

    async def _truncate_round(self, rm: ReplicaManager) -> bool:
        """One OffsetForLeaderEpoch request for the partitions still truncating; True if some
        truncated part-way and must ask again."""
        now = time.monotonic()
        due = {tp: f for tp, f in self.partitions.items() if not f.truncated and f.retry_at <= now}
        if not due:
            return False
        asked: dict[TopicPartition, tuple[Followed, int]] = {}
        by_topic: dict[str, list] = {}
        for tp, f in due.items():
            part = rm.follower(tp[0], tp[1], f.leader_epoch)
            if part is None:
                continue
            latest = part.log.leader_epochs.latest_epoch
            if latest < 0:
                # No epochs known (an empty log, or one written before epochs): Kafka's old rule.
                self._truncate_log(rm, part, part.log.high_watermark, "its high watermark (no leader epochs)")
                f.truncated = True
                continue
            asked[tp] = (f, latest)
            by_topic.setdefault(tp[0], []).append(epoch_v4.OffsetForLeaderPartition(
                partition=i32(tp[1]), current_leader_epoch=i32(f.leader_epoch), leader_epoch=i32(latest)))
        if not by_topic:
            return False
        request = epoch_v4.OffsetForLeaderEpochRequest(replica_id=i32(self.manager.node_id), topics=tuple(
            epoch_v4.OffsetForLeaderTopic(topic=name, partitions=tuple(ps)) for name, ps in by_topic.items()))
        response = await self.conn.request(request, REQUEST_TIMEOUT_S)
        again = False
        for t in response.topics:
            for p in t.partitions:
                tp = (t.topic, int(p.partition))
                entry = asked.get(tp)
                if entry is None:
                    continue
                f, latest = entry
                part = rm.follower(tp[0], tp[1], f.leader_epoch)
                if part is None or self.partitions.get(tp) is not f:
                    continue
                if p.error_code != ErrorCode.none:
                    f.retry_at = time.monotonic() + RETRY_PARTITION_S
                    continue
                lg = part.log
                state = truncation_state(int(p.leader_epoch), int(p.end_offset), lg.leader_epochs,
                                         lg.log_end_offset)
                self._truncate_log(rm, part, state.offset, state.why)
                if state.completed:
                    f.truncated = True
                elif lg.leader_epochs.latest_epoch < latest:
                    again = True
                else:
                    # Nothing was cut (Kafka would ask the same again): fetch from here instead of
                    # asking the same question in a loop.
                    log.warning("%s-%d: epoch %d still latest after truncating for epoch %d; fetching",
                                tp[0], tp[1], latest, int(p.leader_epoch))
                    f.truncated = True
        return again

    def _truncate_log(self, rm: ReplicaManager, part, offset: int, why: str) -> None:
        """Log.truncate_to, also at the log end: an epoch this broker started as leader without
        writing a batch of it starts there and must go too (as Kafka's truncateTo)."""
        if offset < part.log.log_end_offset:
            log.info("%s-%d: truncating from %d to %d, %s", part.topic, part.index, part.log.log_end_offset,
                     offset, why)
        try:
            part.log.truncate_to(offset)
        except LogError as e:
            rm.mark_offline(part.log.directory.parent, str(e), e)
            raise
        rm.cleaner.truncated((part.topic, part.index), part.log.log_end_offset)

    # -- a fetch offset the leader refused (Kafka's handleOutOfRangeError) ------------------------
    async def _reset_out_of_range(self, rm: ReplicaManager) -> None:
        """Where to fetch from when the leader answered OFFSET_OUT_OF_RANGE (Kafka's
        fetchOffsetAndTruncate): a log longer than the leader's is truncated to the leader's log
        end; one that ends below the leader's log start (retention, DeleteRecords, an empty
        volume) holds nothing the leader still has and starts afresh at the leader's log start;
        otherwise it fetches on from its own end."""
        now = time.monotonic()
        due = {tp: f for tp, f in self.partitions.items() if f.out_of_range and f.truncated and f.retry_at <= now}
        if not due:
            return
        for tp, (part, leader_end) in (await self._list_offsets(rm, due, LATEST_TIMESTAMP)).items():
            if leader_end < part.log.log_end_offset:
                log.warning("%s-%d: the leader's log ends at %d, before this replica's end %d; truncating",
                            tp[0], tp[1], leader_end, part.log.log_end_offset)
                self._truncate_log(rm, part, leader_end, "the leader's log end")
                due[tp].out_of_range = False
        due = {tp: f for tp, f in due.items() if f.out_of_range}
        fully = False
        for tp, (part, leader_start) in (await self._list_offsets(rm, due, EARLIEST_TIMESTAMP)).items():
            lg = part.log
            if leader_start > lg.log_end_offset:
                log.warning("%s-%d: this replica ends at %d, below the leader's log start %d; removing its log "
                            "and starting at %d", tp[0], tp[1], lg.log_end_offset, leader_start, leader_start)
                try:
                    lg.truncate_fully_and_start_at(leader_start)
                except LogError as e:
                    rm.mark_offline(lg.directory.parent, str(e), e)
                    raise
                rm.cleaner.truncated(tp, leader_start)
                fully = True
            else:
                log.info("%s-%d: fetching on from this replica's end %d (the leader's log start is %d)",
                         tp[0], tp[1], lg.log_end_offset, leader_start)
            due[tp].out_of_range = False
        if fully:
            await rm.write_checkpoints_async()  # the new log start and recovery point, as Kafka does

    async def _list_offsets(self, rm: ReplicaManager, due: dict[TopicPartition, Followed],
                            timestamp: int) -> dict[TopicPartition, tuple]:
        """ListOffsets to the leader as a replica (replica_id: its log end for LATEST, not the high
        watermark); {tp: (partition, offset)} for the answered partitions still followed at the
        same epoch; refused ones are retried after a back-off."""
        by_topic: dict[str, list] = {}
        for tp, f in due.items():
            if rm.follower(tp[0], tp[1], f.leader_epoch) is not None:
                by_topic.setdefault(tp[0], []).append(list_offsets_v7.ListOffsetsPartition(
                    partition_index=i32(tp[1]), current_leader_epoch=i32(f.leader_epoch), timestamp=i64(timestamp)))
        if not by_topic:
            return {}
        request = list_offsets_v7.ListOffsetsRequest(
            replica_id=i32(self.manager.node_id), isolation_level=0, topics=tuple(
                list_offsets_v7.ListOffsetsTopic(name=name, partitions=tuple(ps)) for name, ps in by_topic.items()))
        response = await self.conn.request(request, REQUEST_TIMEOUT_S)
        out: dict[TopicPartition, tuple] = {}
        for t in response.topics:
            for p in t.partitions:
                tp = (t.name, int(p.partition_index))
                f = due.get(tp)
                if f is None or self.partitions.get(tp) is not f:
                    continue
                part = rm.follower(tp[0], tp[1], f.leader_epoch)
                if part is None:
                    continue
                if p.error_code != ErrorCode.none or int(p.offset) < 0:
                    log.info("%s-%d: leader %d answered ListOffsets with %s; retrying", tp[0], tp[1],
                             self.leader_id, ErrorCode(p.error_code).name)
                    f.retry_at = time.monotonic() + RETRY_PARTITION_S
                    continue
                out[tp] = (part, int(p.offset))
        return out

    # -- fetching ----------------------------------------------------------------------------
    async def _fetch(self, rm: ReplicaManager) -> bool:
        """One Fetch round trip; False if nothing could be fetched (all truncating or backing off)."""
        now = time.monotonic()
        want: dict[TopicPartition, tuple[int, int, int]] = {}
        quota = self.manager.quotas.follower if self.manager.quotas is not None else None
        for tp, f in self.partitions.items():
            if not f.truncated or f.out_of_range or f.retry_at > now:
                continue
            part = rm.follower(tp[0], tp[1], f.leader_epoch)
            if part is None:
                continue
            if quota is not None and quota.should_throttle(tp, self._in_sync(rm, tp)):
                continue  # KIP-73: not fetched while the follower throttle is exceeded
            want[tp] = (part.log.log_end_offset, f.leader_epoch, part.log.log_start_offset)
            self.topic_ids[tp[0]] = part.topic_id
        if not want:
            if self.sent and self.session_id != INVALID_SESSION_ID:
                pass  # the session stays; its partitions are forgotten once something is fetched again
            return False
        full = self.session_id == INVALID_SESSION_ID or self.session_epoch == INITIAL_EPOCH
        if full:
            named, forgotten = dict(want), []
            session_id, session_epoch = self.session_id, INITIAL_EPOCH
        else:
            named = {tp: v for tp, v in want.items() if self.sent.get(tp) != v}
            forgotten = [tp for tp in self.sent if tp not in want]
            session_id, session_epoch = self.session_id, self.session_epoch
        cfg = self.manager.config
        topics: dict[str, list] = {}
        for tp, (offset, epoch, log_start) in named.items():
            topics.setdefault(tp[0], []).append(fetch_v15.FetchPartition(
                partition=i32(tp[1]), current_leader_epoch=i32(epoch), fetch_offset=i64(offset),
                log_start_offset=i64(log_start), partition_max_bytes=i32(cfg["replica.fetch.max.bytes"])))
        gone: dict[str, list] = {}
        for tp in forgotten:
            gone.setdefault(tp[0], []).append(i32(tp[1]))
        wait_ms = cfg["replica.fetch.wait.max.ms"]
        ids = self.topic_ids
        epoch = follower_identity.own_broker_epoch(rm.store.image, self.manager.node_id)
        request = fetch_v15.FetchRequest(
            replica_state=fetch_v15.ReplicaState(replica_id=i32(self.manager.node_id), replica_epoch=i64(epoch)),
            max_wait=datetime.timedelta(milliseconds=wait_ms),
            min_bytes=i32(1), max_bytes=i32(cfg["replica.fetch.response.max.bytes"]), isolation_level=0,
            session_id=i32(session_id), session_epoch=i32(session_epoch),
            topics=tuple(fetch_v15.FetchTopic(topic_id=ids[name], partitions=tuple(ps)) for name, ps in topics.items()),
            forgotten_topics_data=tuple(fetch_v15.ForgottenTopic(topic_id=ids[name], partitions=tuple(ps))
                                        for name, ps in gone.items()),
            rack_id=cfg["broker.rack"] or "")
        response = await self.conn.request(request, REQUEST_TIMEOUT_S + wait_ms / 1000)
        self.fetches += 1
        code = response.error_code
        if code in (ErrorCode.fetch_session_id_not_found, ErrorCode.invalid_fetch_session_epoch):
            log.info("replica fetcher for leader %d: %s; starting a new session", self.leader_id, code.name)
            self._reset_session()
            return True
        if code != ErrorCode.none:
            raise ClientError(f"leader {self.leader_id} answered Fetch with {code.name}")
        # The session: a full request opens one (id 0 in the answer: the leader's cache had no room).
        if full:
            self.session_id = int(response.session_id)
            self.session_epoch = next_epoch(INITIAL_EPOCH) if self.session_id != INVALID_SESSION_ID else INITIAL_EPOCH
            self.sent = dict(named)
        else:
            self.session_epoch = next_epoch(self.session_epoch)
            self.sent.update(named)
            for tp in forgotten:
                self.sent.pop(tp, None)
        names = {topic_id: name for name, topic_id in ids.items()}
        for t in response.responses:
            name = names.get(t.topic_id)
            for p in t.partitions:
                if name is not None:
                    self._apply(rm, (name, int(p.partition_index)), p, want)
        return True

    def _in_sync(self, rm: ReplicaManager, tp: TopicPartition) -> bool:
        """Whether this broker is in the partition's ISR (the metadata's view, as Kafka's fetch state)."""
        rec = rm.store.image.topics.get(tp[0])
        if rec is None or rec.assignment is None or tp[1] >= len(rec.assignment):
            return False
        return self.manager.node_id in rec.assignment[tp[1]].isr

    def _apply(self, rm: ReplicaManager, tp: TopicPartition, p, want) -> None:
        f = self.partitions.get(tp)
        if f is None or tp not in want:
            return
        part = rm.follower(tp[0], tp[1], f.leader_epoch)
        if part is None:
            return
        code = p.error_code
        if code != ErrorCode.none:
            self.sent.pop(tp, None)  # named again when it is retried
            if code == ErrorCode.offset_out_of_range:
                log.info("%s-%d: fetch offset %d out of range at leader %d; asking its log end and start",
                         tp[0], tp[1], want[tp][0], self.leader_id)
                f.out_of_range = True
                return
            f.retry_at = time.monotonic() + RETRY_PARTITION_S
            return
        lg = part.log
        records = p.records
        if records and lg.log_end_offset == want[tp][0]:
            size = whole_batches_size(records)
            quota = self.manager.quotas.follower if self.manager.quotas is not None else None
            if size and quota is not None and quota.is_throttled(tp):
                quota.record(size)
            if size:
                try:
                    rm.append_as_follower(part, bytes(records[:size]) if size < len(records) else bytes(records))
                except LogError as e:
                    log.error("%s-%d: cannot append the leader's batches: %s; truncating again", tp[0], tp[1], e)
                    f.truncated = False
                    f.retry_at = time.monotonic() + RETRY_PARTITION_S
                    self.sent.pop(tp, None)
                    return
        before = (lg.high_watermark, lg.log_start_offset)
        lg.high_watermark = min(int(p.high_watermark), lg.log_end_offset)
        leader_start = int(p.log_start_offset)
        if leader_start > lg.log_start_offset:  # KIP-107: the leader's DeleteRecords or retention
            lg.advance_log_start_offset(min(leader_start, lg.high_watermark))
        if (lg.high_watermark, lg.log_start_offset) != before:
            # Consumers fetching from this follower (KIP-392) wait for its high watermark, as
            # Kafka's ReplicaFetcherThread completes delayed fetches of partitions whose moved.
            rm.fetch_purgatory.check_and_complete(tp)


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader it follows partitions from, kept in step
    with what the replica manager follows (`ReplicaManager.on_follow_change`)."""

    def __init__(self, config: BrokerConfig, replicas: ReplicaManager) -> None:
        self.config = config
        self.node_id = config.node_id
        self.replicas = replicas
        self.security = inter_broker_client(config)  # TLS/SASL to peers; ConfigError at start-up
        self.listener = self.security.listener
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.running = False
        self.quotas = None  # quotas/replication_quota.ReplicationQuotas (its follower side), set by the broker

    def start(self) -> None:
        self.running = True
        self.update(self.replicas.following())

    def update(self, following: dict[TopicPartition, tuple[int, int]]) -> None:
        """{tp: (leader, epoch)}: start, re-plan and stop fetchers to match."""
        if not self.running:
            return
        by_leader: dict[int, dict[TopicPartition, int]] = {}
        for tp, (leader, epoch) in following.items():
            if leader >= 0 and leader != self.node_id:
                by_leader.setdefault(leader, {})[tp] = epoch
        for leader in [leader for leader in self.fetchers if leader not in by_leader]:
            fetcher = self.fetchers.pop(leader)
            if fetcher.task is not None:
                fetcher.task.cancel()
            fetcher._reset()
        for leader, wanted in by_leader.items():
            fetcher = self.fetchers.get(leader)
            if fetcher is None:
                fetcher = self.fetchers[leader] = ReplicaFetcher(self, leader)
                fetcher.task = asyncio.get_running_loop().create_task(fetcher.run(), name=f"replica-fetcher-{leader}")
            fetcher.set_partitions(wanted)

    async def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop every fetcher (bounded: shutdown never waits on one that does not end)."""
        self.running = False
        tasks = [f.task for f in self.fetchers.values() if f.task is not None]
        for t in tasks:
            t.cancel()
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=timeout_s)
            if pending:
                log.warning("%d replica fetcher(s) did not stop within %.0fs; leaving them", len(pending), timeout_s)
        for f in self.fetchers.values():
            f._reset()
        self.fetchers = {}
