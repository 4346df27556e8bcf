"""Followers copy their leaders' logs (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

One fetcher task per leader broker serves every partition this broker follows from it, over one
Kafka-protocol connection to the leader's inter-broker listener (its endpoint from the broker's
registration). It speaks the protocol any Kafka broker would:

- After a leader change, before fetching a partition, it asks the leader OffsetForLeaderEpoch for
  the latest epoch in its own log and truncates to min(the leader's end of that epoch, its own
  end of it) (KIP-101/279); a log without epochs truncates to its high watermark.
- Fetch v15 with ReplicaState = this broker's id and broker epoch (KIP-903: the leader accepts
  it only from a live registration in its current incarnation, `follower_identity`), topic ids,
  isolation_level 0 and each partition's current_leader_epoch, in one KIP-227 session
  (privileged at the leader: never evicted for a consumer's): after the first full fetch each
  request names only partitions whose fetch offset, epoch or log start moved, and forgets those
  no longer followed from this leader.
- The leader's batches are appended as they are (`Log.append_as_follower`, offsets and epochs
  kept); the follower's high watermark becomes min(the leader's, its own log end) and its log
  start follows the leader's (DeleteRecords, retention).
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
from kio.schema.offset_for_leader_epoch.v4 import request as epoch_v4
from kio.static.primitive import i32, i64

from broker.config import BrokerConfig
from broker.log.leader_epoch import UNDEFINED_EPOCH_OFFSET
from broker.log.log import LogError
from broker.network.client import ClientError, KafkaConnection
from broker.protocol.records import whole_batches_size
from broker.server import cluster_view, follower_identity
from broker.server.fetch_session import INITIAL_EPOCH, INVALID_SESSION_ID, next_epoch
from broker.server.replica_manager import ReplicaManager, TopicPartition

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
REQUEST_TIMEOUT_S = 30.0
RETRY_PARTITION_S = 0.2  # a partition the leader refused (it has not seen the new epoch yet)


@dataclass
class Followed:
    """One partition followed from this fetcher's leader."""

    leader_epoch: int
    truncated: bool = False  # OffsetForLeaderEpoch done for this epoch
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
        while True:
            try:
                if not self.partitions:
                    self.changed.clear()
                    await self.changed.wait()
                    continue
                if self.conn is None:
                    await self._connect()
                await self._truncate(rm)
                if not await self._fetch(rm):
                    self.changed.clear()
                    try:
                        await asyncio.wait_for(self.changed.wait(), RETRY_PARTITION_S)
                    except asyncio.TimeoutError:
                        pass
            except asyncio.CancelledError:
                raise
            except ClientError as e:
                log.info("replica fetcher for leader %d: %s; retrying in %.1fs", self.leader_id, e, backoff)
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
        conn = KafkaConnection(address.host, address.port, f"flotilla-replica-fetcher-{self.manager.node_id}")
        await conn.connect(CONNECT_TIMEOUT_S)
        self.conn = conn
        self._reset_session()

    # -- truncation (KIP-101/279) ------------------------------------------------------------
    async def _truncate(self, rm: ReplicaManager) -> None:
        now = time.monotonic()
        due = {tp: f for tp, f in self.partitions.items() if not f.truncated and f.retry_at <= now}
        if not due:
            return
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
            return
        request = epoch_v4.OffsetForLeaderEpochRequest(replica_id=i32(self.manager.node_id), topics=tuple(
            epoch_v4.OffsetForLeaderTopic(topic=name, partitions=tuple(ps)) for name, ps in by_topic.items()))
        response = await self.conn.request(request, REQUEST_TIMEOUT_S)
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
                leader_epoch, end = int(p.leader_epoch), int(p.end_offset)
                lg = part.log
                if end == UNDEFINED_EPOCH_OFFSET:
                    target, why = lg.high_watermark, "its high watermark (the leader knows no such epoch)"
                elif leader_epoch == latest:
                    target, why = min(end, lg.log_end_offset), f"the leader's end of epoch {leader_epoch}"
                else:
                    _, own_end = lg.leader_epochs.end_offset_for(leader_epoch, lg.log_end_offset)
                    target = min(end, own_end) if own_end >= 0 else end
                    why = f"the end of epoch {leader_epoch}, the latest both logs hold"
                self._truncate_log(rm, part, target, why)
                f.truncated = True

    def _truncate_log(self, rm: ReplicaManager, part, offset: int, why: str) -> None:
        if offset < part.log.log_end_offset:
            log.info("%s-%d: truncating from %d to %d, %s", part.topic, part.index, part.log.log_end_offset,
                     offset, why)
            try:
                part.log.truncate_to(offset)
            except LogError as e:
                rm.mark_offline(part.log.directory.parent, str(e), e)
                raise

    # -- fetching ----------------------------------------------------------------------------
    async def _fetch(self, rm: ReplicaManager) -> bool:
        """One Fetch round trip; False if nothing could be fetched (all truncating or backing off)."""
        now = time.monotonic()
        want: dict[TopicPartition, tuple[int, int, int]] = {}
        for tp, f in self.partitions.items():
            if not f.truncated or f.retry_at > now:
                continue
            part = rm.follower(tp[0], tp[1], f.leader_epoch)
            if part is None:
                continue
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

    def _apply(self, rm: ReplicaManager, tp: TopicPartition, p, want) -> None:
        f = self.partitions.get(tp)
        if f is None or tp not in want:
            return
        part = rm.follower(tp[0], tp[1], f.leader_epoch)
        if part is None:
            return
        code = p.error_code
        if code != ErrorCode.none:
            if code == ErrorCode.offset_out_of_range:
                log.warning("%s-%d: offset %d out of range at leader %d; truncating again", tp[0], tp[1],
                            want[tp][0], self.leader_id)
                f.truncated = False
            f.retry_at = time.monotonic() + RETRY_PARTITION_S
            self.sent.pop(tp, None)  # named again when it is retried
            return
        lg = part.log
        records = p.records
        if records and lg.log_end_offset == want[tp][0]:
            size = whole_batches_size(records)
            if size:
                try:
                    rm.append_as_follower(part, bytes(records[:size]) if size < len(records) else bytes(records))
                except LogError as e:
                    log.error("%s-%d: cannot append the leader's batches: %s; truncating again", tp[0], tp[1], e)
                    f.truncated = False
                    f.retry_at = time.monotonic() + RETRY_PARTITION_S
                    self.sent.pop(tp, None)
                    return
        lg.high_watermark = min(int(p.high_watermark), lg.log_end_offset)
        leader_start = int(p.log_start_offset)
        if leader_start > lg.log_start_offset:
            lg.advance_log_start_offset(min(leader_start, lg.log_end_offset))


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader it follows partitions from, kept in step
    with what the replica manager follows (`ReplicaManager.on_follow_change`)."""

    def __init__(self, config: BrokerConfig, replicas: ReplicaManager) -> None:
        self.config = config
        self.node_id = config.node_id
        self.replicas = replicas
        inter = config["inter.broker.listener.name"]
        self.listener = inter or config.listeners[0].name
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.running = False

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

    async def stop(self) -> None:
        self.running = False
        tasks = [f.task for f in self.fetchers.values() if f.task is not None]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for f in self.fetchers.values():
            f._reset()
        self.fetchers = {}
