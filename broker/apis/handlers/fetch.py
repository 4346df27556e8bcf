"""Fetch (key 1): read record batches, long-polling until min_bytes arrive or max_wait passes.

Record bytes are not copied: reads give file regions that the connection sends with
sendfile(), framed by the hand-written encoder in broker.protocol.fetch_response.
Fetch sessions (KIP-227, broker/apis/fetch_session.py) decide which partitions a request
covers and which of them the response carries; this module reads them and waits.
A partition led by another broker answers NOT_LEADER_OR_FOLLOWER with the leader's id, epoch
and endpoint in the tagged fields (KIP-951), as Kafka does. A consumer's current_leader_epoch
older than the partition's epoch here is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH
(KIP-320, broker/replica/leader_epoch_check.py): it must not read from a leader it does not know.

KIP-392: a consumer's Fetch v11+ may be served by a follower (Kafka's FetchParams.fetchOnlyFromLeader
is false for it), up to the follower's high watermark (read_committed: its last stable offset);
with `replica.selector.class` set, the leader answers a partition with a preferred read replica
(broker/apis/preferred_replica.py) and no records instead of serving it.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from broker.log.log import OffsetOutOfRange
from broker.protocol.response import Response
from broker.protocol import fetch_response
from broker.protocol.fetch_response import PartitionResult, TopicResult
from broker.security.acl import AclOperation, ResourceType
from broker.metadata import cluster_view
from broker.replica import follower_identity, reassignment_metrics
from broker.replica.delayed_fetch import DelayedFetch
from broker.apis.preferred_replica import preferred_read_replica_of
from broker.apis.fetch_session import CachedPartition, FetchContext, IncrementalFetchContext, PartitionKey, topic_key
from broker.apis.handlers.base import Handler, RequestContext
from broker.replica.leader_epoch_check import check_current_leader_epoch

ALL_BYTES = 2**31 - 1
READ_COMMITTED = 1  # isolation_level (v4+): read only below the last stable offset
FIRST_RACK_AWARE = 11  # Fetch v11 (KIP-392): rack_id; consumers may fetch from followers
REFUSAL_LOG_INTERVAL_S = 60.0

log = logging.getLogger(__name__)


def _NOTHING(topic: str) -> bool:
    """The read rule of a follower fetch without CLUSTER_ACTION."""
    return False


def replica_id_of(request) -> int:
    """The fetching replica's id (-1 for consumers): a field before v15, in ReplicaState after."""
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1))


def replica_epoch_of(request) -> int:
    """The fetching broker's epoch (KIP-903, v15+); -1 when the request carries none."""
    state = getattr(request, "replica_state", None)
    return int(state.replica_epoch) if state is not None else follower_identity.NO_EPOCH


class FetchHandler(Handler):
    api_key = 1
    min_version = fetch_response.MIN_VERSION
    max_version = fetch_response.MAX_VERSION

    def __init__(self, broker) -> None:
        super().__init__(broker)
        self._inter_listener: str | None = None
        self._refusal_logged_at = -REFUSAL_LOG_INTERVAL_S

    @property
    def inter_listener(self) -> str:
        """The listener follower fetches must arrive on (read from the config on first use)."""
        if self._inter_listener is None:
            self._inter_listener = follower_identity.inter_broker_listener(self.broker.config)
        return self._inter_listener

    # -- request -> session context --------------------------------------------------------------

    def fetch_data(self, uses_topic_ids: bool, request) -> dict[PartitionKey, CachedPartition]:
        """The partitions the request names, in request order, keyed as its session keys them."""
        image = self.broker.store.image
        out: dict[PartitionKey, CachedPartition] = {}
        first = request.topics[0].partitions[0] if request.topics and request.topics[0].partitions else None
        has_log_start = hasattr(first, "log_start_offset")  # v5+
        has_epoch = hasattr(first, "current_leader_epoch")  # v9+
        for t in request.topics:
            if uses_topic_ids:
                rec = image.topic_by_id(t.topic_id)
                # the image's own uuid object when known: `is` then settles the per-fetch id check
                name, topic_id = (rec.name, rec.topic_id) if rec else (None, t.topic_id)
                key = topic_key(topic_id)
            else:
                name, topic_id = t.topic, None
                key = name
            for p in t.partitions:  # kio's integers are plain ints
                out[(key, p.partition)] = CachedPartition(name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                                                          p.log_start_offset if has_log_start else -1,
                                                          p.current_leader_epoch if has_epoch else -1)
        return out

    @staticmethod
    def forgotten(uses_topic_ids: bool, request) -> list[PartitionKey]:
        return [(topic_key(t.topic_id) if uses_topic_ids else t.topic, int(p))
                for t in getattr(request, "forgotten_topics_data", ()) for p in t.partitions]

    def new_context(self, ctx: RequestContext, request) -> FetchContext:
        uses_topic_ids = ctx.api_version >= fetch_response.FIRST_TOPIC_ID
        return self.broker.fetch_sessions.new_context(
            session_id=int(getattr(request, "session_id", 0)),
            epoch=int(getattr(request, "session_epoch", -1)),  # before v7: sessionless
            privileged=replica_id_of(request) >= 0,
            uses_topic_ids=uses_topic_ids,
            fetch_data=self.fetch_data(uses_topic_ids, request),
            to_forget=self.forgotten(uses_topic_ids, request),
        )

    # -- reading ------------------------------------------------------------------------------

    def read(self, partitions: Iterable[CachedPartition], skip_unchanged: bool, max_bytes: int, replica_id: int = -1,
             refused: bool = False, read_committed: bool = False, may_read: Callable[[str], bool] | None = None,
             any_replica: bool = False, prefer: Callable[[object, int], int] | None = None):
        """Read each partition from its fetch offset. Returns ([(partition, result)], record bytes,
        any error?, {(topic, index): bytes readable} for the partitions that had some).

        With `skip_unchanged` (incremental sessions), a partition with no new records and no moved
        offsets produces no result at all: that is what keeps an idle session of many partitions cheap.
        The partitions held here are exactly those this broker leads (the replica manager follows
        the image), so a partition found there needs no further leadership check.

        A follower's fetch (`replica_id` >= 0) first tells the leader's replica state where the
        follower's log ends (which may move the high watermark and the ISR), then reads up to the
        log end, not the high watermark: followers copy everything, consumers only what is committed.
        A fetch whose `replica_id` is `refused` (follower_identity) reads nothing and moves nothing.

        A consumer at READ_COMMITTED (KIP-98) reads only below the last stable offset, and is told
        the aborted transactions overlapping what it may read (from the aborted transaction
        indexes) so it can drop their records.

        With an authorizer, `may_read(topic)` says whether the fetcher may read the topic; a
        partition of a topic it may not answers TOPIC_AUTHORIZATION_FAILED (after an unknown
        topic id, which Kafka reports first).

        KIP-392, consumers only: with `any_replica` (Fetch v11+) a partition this broker follows is
        read as on the leader but up to the follower's own high watermark (an offset between it
        and the log end reads nothing, one past the log end is OFFSET_OUT_OF_RANGE, as Kafka's
        Partition.fetchRecords on a follower). With `prefer(partition, fetch_offset)`, a led
        partition whose preferred read replica is another broker answers that replica, the
        offsets and no records; such an answer, like an error, makes the fetch answer at once
        (the third value returned).
        """
        rm = self.broker.replicas
        held = rm.partitions
        quotas = self.broker.replication_quotas
        leader_quota = quotas.leader if quotas is not None and replica_id >= 0 else None
        results: list[tuple[CachedPartition, PartitionResult]] = []
        available: dict[tuple[str, int], int] = {}
        total = 0
        errors = False
        for cp in partitions:
            if may_read is not None and cp.topic is not None and not may_read(cp.topic):
                # Empty records, not null, as Kafka's MemoryRecords.EMPTY: librdkafka reads the
                # records of this error before the code and fails on a null set.
                results.append((cp, PartitionResult(cp.partition, error_code=ErrorCode.topic_authorization_failed,
                                                    records=b"")))
                errors = True
                continue
            part = held.get(cp.tp)
            if part is None or (not part.is_leader and not (any_replica and replica_id < 0)) or (
                    cp.topic_id is not None and part.topic_id is not cp.topic_id and part.topic_id != cp.topic_id):
                results.append((cp, self.error_result(cp)))
                errors = True
                continue
            lg = part.log
            if replica_id >= 0:
                code = ErrorCode.not_leader_or_follower if refused else rm.follower_fetched(
                    part, replica_id, cp.fetch_offset, cp.fetcher_log_start_offset, cp.current_leader_epoch)
                if code != ErrorCode.none:
                    results.append((cp, PartitionResult(cp.partition, error_code=code)))
                    errors = True
                    continue
                upper = lg.log_end_offset
                if leader_quota is not None and leader_quota.should_throttle(cp.tp, replica_id in part.replica_state.isr):
                    upper = cp.fetch_offset  # KIP-73: nothing for a throttled replica out of the ISR
            else:
                code = check_current_leader_epoch(max(cp.current_leader_epoch, -1), part.leader_epoch)
                if code != ErrorCode.none:  # KIP-320: the consumer's leader is not this one
                    results.append((cp, PartitionResult(cp.partition, error_code=code)))
                    errors = True
                    continue
                upper = lg.high_watermark
            hw, log_start = lg.high_watermark, lg.log_start_offset
            lso = lg.last_stable_offset
            if prefer is not None and replica_id < 0 and part.is_leader:
                preferred = prefer(part, cp.fetch_offset)
                if preferred >= 0:  # Kafka's readFromLog: the offsets, no read
                    results.append((cp, PartitionResult(cp.partition, 0, hw, lso, log_start, None, preferred, b"")))
                    errors = True
                    continue
            if read_committed and replica_id < 0:
                upper = lso
            if (skip_unchanged and cp.fetch_offset == upper and hw == cp.high_watermark
                    and lso == cp.last_stable_offset and log_start == cp.log_start_offset):
                continue  # CachedPartition.nothing_new, inlined: this is the loop over every idle partition
            pr = PartitionResult(cp.partition, 0, hw, lso, log_start, None, -1, b"")
            if read_committed and replica_id < 0:
                pr.aborted_transactions = [(t.producer_id, t.first_offset)
                                           for t in lg.aborted_transactions(cp.fetch_offset, upper)]
            if cp.fetch_offset == upper and log_start <= upper:
                results.append((cp, pr))  # caught up: nothing to read
                continue
            try:
                budget = min(cp.max_bytes, max_bytes - total)
                region = rm.read(part, cp.fetch_offset, max(budget, 0), min_one=(total == 0), upper_bound=upper)
            except OffsetOutOfRange:
                pr.error_code = ErrorCode.offset_out_of_range
                errors = True
                region = None
            if region is not None and (budget > 0 or total == 0):
                pr.records = region
                total += region.length
                available[cp.tp] = region.length
            results.append((cp, pr))
        return results, total, errors, available

    def error_result(self, cp: CachedPartition) -> PartitionResult:
        """Why a partition cannot be read here: unknown topic (id), or led elsewhere (KIP-951 hint)."""
        if cp.topic is None and cp.topic_id is not None:
            rec = self.broker.store.image.topic_by_id(cp.topic_id)  # unknown when cached, may exist now
            if rec is not None:
                cp.resolve(rec.name)
        if cp.topic is None:
            code = ErrorCode.unknown_topic_id if cp.topic_id is not None else ErrorCode.unknown_topic_or_partition
            return PartitionResult(cp.partition, error_code=code)
        part, code, state = self.broker.replicas.leader_or_error(cp.topic, cp.partition)
        if part is not None:  # led here, but the name belongs to a re-created topic now
            return PartitionResult(cp.partition, error_code=ErrorCode.unknown_topic_id)
        held = self.broker.replicas.partitions.get(cp.tp)
        if held is not None:  # a follower here checks the epoch first, as Kafka's Partition does
            epoch_code = check_current_leader_epoch(max(cp.current_leader_epoch, -1), held.leader_epoch)
            if epoch_code != ErrorCode.none:
                return PartitionResult(cp.partition, error_code=epoch_code)
        if code == ErrorCode.leader_not_available:
            code = ErrorCode.not_leader_or_follower  # what Kafka's Fetch answers for it
        pr = PartitionResult(cp.partition, error_code=code)
        if code == ErrorCode.not_leader_or_follower:
            pr.current_leader = (state.leader, state.leader_epoch) if state is not None else (-1, -1)
        return pr

    def watcher(self, context: FetchContext, partitions: Iterable[CachedPartition]):
        """(watch keys, key -> the cached partition behind it) for a DelayedFetch. An incremental
        session is looked up through its own index, so waiting builds no map of 10,000 entries."""
        keys = [cp.tp for cp in partitions if cp.topic is not None]
        if isinstance(context, IncrementalFetchContext):
            session = context.session
            if session.uses_topic_ids:
                image = self.broker.store.image

                def lookup(key):
                    rec = image.topics.get(key[0])
                    return session.partitions.get((topic_key(rec.topic_id), key[1])) if rec is not None else None
            else:
                def lookup(key):
                    return session.partitions.get(key)
            return keys, lookup
        by_tp = {cp.tp: cp for cp in partitions if cp.topic is not None}
        return keys, by_tp.get

    # -- response -----------------------------------------------------------------------------

    @staticmethod
    def topics(sent: list[tuple[CachedPartition, PartitionResult]]) -> list[TopicResult]:
        """Results grouped into topics, consecutive partitions of one topic together, in order."""
        out: list[TopicResult] = []
        last = None
        for cp, pr in sent:
            if last is None or last.name != cp.topic or last.topic_id != cp.topic_id:
                last = TopicResult(name=cp.topic, topic_id=cp.topic_id)
                out.append(last)
            last.partitions.append(pr)
        return out

    def leader_endpoints(self, ctx: RequestContext, topics: list[TopicResult]) -> list[fetch_response.NodeEndpoint]:
        """KIP-951: where the leaders named in NOT_LEADER_OR_FOLLOWER answers are."""
        image = self.broker.store.image
        listener = cluster_view.listener_of(ctx)
        nodes = {}
        for tr in topics:
            for pr in tr.partitions:
                if pr.current_leader is not None and pr.current_leader[0] >= 0 and pr.current_leader[0] not in nodes:
                    a = cluster_view.node_address(image, pr.current_leader[0], listener)
                    if a is not None:
                        nodes[a.node_id] = fetch_response.NodeEndpoint(a.node_id, a.host, a.port, a.rack)
        return [nodes[k] for k in sorted(nodes)]

    def follower_refused(self, ctx: RequestContext, request, replica_id: int) -> bool:
        """Whether a fetch naming `replica_id` is refused as a follower's (follower_identity); an
        accepted one marks its connection as that broker's (inter-broker requests on it are exempt
        from client quotas)."""
        why = follower_identity.refusal(self.broker.store.image, replica_id, replica_epoch_of(request),
                                        cluster_view.listener_of(ctx), self.inter_listener)
        conn = ctx.connection
        if why is None:
            conn.broker_id = replica_id
            return False
        conn.broker_id = None
        now = time.monotonic()
        if now - self._refusal_logged_at >= REFUSAL_LOG_INTERVAL_S:  # a client may send these in a loop
            self._refusal_logged_at = now
            log.warning("Fetch from %s as follower %d refused (NOT_LEADER_OR_FOLLOWER): %s", conn.peer, replica_id, why)
        return True

    @staticmethod
    def read_rule(ctx: RequestContext, replica_id: int) -> Callable[[str], bool] | None:
        """Kafka's checks: a follower needs CLUSTER_ACTION on the cluster (else every partition is
        TOPIC_AUTHORIZATION_FAILED), a consumer READ on each topic. None: no authorizer."""
        authz = ctx.authz
        if not authz.enabled:
            return None
        if replica_id >= 0:
            return None if authz.cluster(AclOperation.CLUSTER_ACTION) else _NOTHING
        return lambda topic: authz.allowed(AclOperation.READ, ResourceType.TOPIC, topic)

    async def handle(self, ctx: RequestContext, request):
        context = self.new_context(ctx, request)
        self.broker.metrics.fetch_requests.labels(context.kind).inc()
        quotas = self.broker.quotas
        replica_id = replica_id_of(request)
        may_read = self.read_rule(ctx, replica_id)
        refused = replica_id >= 0 and (may_read is _NOTHING or self.follower_refused(ctx, request, replica_id))
        follower = replica_id >= 0 and not refused
        max_bytes = getattr(request, "max_bytes", ALL_BYTES)
        if follower:  # replication is not a client: no client quota applies (Kafka's KafkaApis.handleFetchRequest)
            quotas.exempt(ctx)
        else:
            quota_bytes = quotas.fetch.max_value_in_quota_window(ctx.user, ctx.client_id)
            if quota_bytes is not None:
                max_bytes = max(1, min(max_bytes, int(quota_bytes)))
        partitions = context.partitions()
        read_committed = int(getattr(request, "isolation_level", 0)) == READ_COMMITTED
        any_replica = replica_id < 0 and ctx.api_version >= FIRST_RACK_AWARE  # KIP-392
        prefer = self.preferred_rule(ctx, request) if any_replica else None
        results, total, errors, available = self.read(partitions, context.skip_unchanged, max_bytes, replica_id,
                                                      refused, read_committed, may_read, any_replica, prefer)
        max_wait_s = request.max_wait.total_seconds()
        if total < request.min_bytes and not errors and max_wait_s > 0 and context.kind != "session_error":
            keys, lookup = self.watcher(context, partitions)
            if keys:
                op = DelayedFetch(self.broker.replicas, lookup, available, request.min_bytes, replica=follower,
                                  read_committed=read_committed, held_back=self.held_back(replica_id) if follower else None,
                                  any_replica=any_replica)
                parked = time.perf_counter_ns()
                await self.broker.fetch_purgatory.wait(op, keys, max_wait_s)
                ctx.waited_ns += time.perf_counter_ns() - parked  # not handler time (request quota)
                results, total, errors, available = self.read(partitions, context.skip_unchanged, max_bytes,
                                                              replica_id, refused, read_committed, may_read,
                                                              any_replica, prefer)
        if not follower and (quotas.fetch.enabled or quotas.request.enabled):
            throttled = self.throttled_response(ctx, context, results)
            if throttled is not None:
                return throttled
        error_code, session_id, sent = context.respond(results)
        if follower:
            self.record_throttled(ctx.api_version, sent)
        topics = self.topics(sent)
        if follower:  # bytes to replicas a reassignment is adding (Kafka's ReassignmentBytesOutPerSec)
            reassignment_metrics.count_out(self.broker.replicas.reassignment_bytes, self.broker.store.image,
                                           topics, replica_id)
        for tr in topics:
            if tr.name is not None:
                size = sum(p.records_size for p in tr.partitions)
                if size:
                    self.broker.metrics.bytes_out.labels(tr.name).inc(size)
        if any_replica:
            self.count_follower_bytes(sent, getattr(request, "rack_id", "") or "")
        chunks = fetch_response.encode_fetch_response(
            ctx.api_version, ctx.header.correlation_id, throttle_time_ms=ctx.throttle_ms, error_code=error_code,
            session_id=session_id, topics=topics, node_endpoints=self.leader_endpoints(ctx, topics))
        return Response(chunks)

    def preferred_rule(self, ctx: RequestContext, request) -> Callable[[object, int], int] | None:
        """KIP-392: (led partition, fetch offset) -> the preferred read replica for this consumer,
        or None when no replica.selector.class is set or the client names no rack."""
        selector = self.broker.config["replica.selector.class"]
        client_rack = getattr(request, "rack_id", "") or ""
        if not selector or not client_rack:
            return None
        image = self.broker.store.image
        listener = cluster_view.listener_of(ctx)
        return lambda part, offset: preferred_read_replica_of(part, image, listener, selector, client_rack, offset)

    def count_follower_bytes(self, sent, client_rack: str) -> None:
        """Record bytes this broker served to a consumer from partitions it follows (KIP-392),
        by the client's rack: "" when it names none, "other" when no broker is in it (a client
        chooses its rack id: the label never takes a value no broker has)."""
        held = self.broker.replicas.partitions
        size = 0
        for cp, pr in sent:
            n = pr.records_size
            if n:
                part = held.get(cp.tp)
                if part is not None and not part.is_leader:
                    size += n
        if size:
            if client_rack and all(reg.rack != client_rack for reg in self.broker.store.image.brokers.values()):
                client_rack = "other"
            self.broker.metrics.follower_fetch_bytes.labels(client_rack).inc(size)

    def held_back(self, replica_id: int) -> Callable[[tuple[str, int]], bool] | None:
        """For a parked follower fetch: whether the leader throttle holds a partition back now."""
        quotas = self.broker.replication_quotas
        if quotas is None or not quotas.leader.partitions:
            return None
        held = self.broker.replicas.partitions

        def check(tp: tuple[str, int]) -> bool:
            part = held.get(tp)
            return (part is not None and part.is_leader and quotas.leader.is_throttled(tp)
                    and replica_id not in part.replica_state.isr and quotas.leader.is_exceeded())
        return check

    def record_throttled(self, version: int, sent) -> None:
        """KIP-73, as Kafka's KafkaApis counts it: every follower fetch records against the leader
        quota the size of its response restricted to the throttled partitions (framing included,
        so even an idle in-sync follower's fetches count; records of in-sync replicas too)."""
        quotas = self.broker.replication_quotas
        if quotas is None or (quotas.leader.bound is None and not quotas.leader.partitions):
            return  # no throttle set: nothing to measure (and no "throttled bytes" to count)
        throttled = [(cp, pr) for cp, pr in sent
                     if cp.topic is not None and quotas.leader.is_throttled((cp.topic, cp.partition))]
        quotas.leader.record(fetch_response.quota_size(version, self.topics(throttled)))

    # -- quotas (KIP-13) ------------------------------------------------------------------------

    def throttled_response(self, ctx: RequestContext, context: FetchContext, results) -> Response | None:
        """Record the response's size against the fetch quota and the handler time against the
        request quota; over either, answer as Kafka does: no partitions, the throttle time, and
        the read bytes taken back from the quota (nothing was sent). None: not throttled."""
        quotas = self.broker.quotas
        topics = self.topics(results)
        size = fetch_response.response_size(fetch_response.encode_fetch_response(
            ctx.api_version, ctx.header.correlation_id, throttle_time_ms=0, error_code=0, session_id=0,
            topics=topics, node_endpoints=self.leader_endpoints(ctx, topics)))
        bandwidth, request = quotas.bandwidth_throttle_ms(quotas.fetch, ctx, size)
        if not ctx.throttle_ms:
            return None
        quotas.fetch.unrecord(ctx.user, ctx.client_id, size)
        error_code, session_id = throttled_session(context)
        return Response(fetch_response.encode_fetch_response(
            ctx.api_version, ctx.header.correlation_id, throttle_time_ms=ctx.throttle_ms, error_code=error_code,
            session_id=session_id, topics=[]))


def throttled_session(context: FetchContext) -> tuple[int, int]:
    """(error code, session id) of a throttled answer, as Kafka's getThrottledResponse: a full
    request opens no session, an incremental one keeps its session (the epoch already moved on)."""
    if context.kind == "incremental":
        session = context.session
        if session.epoch != context.expected_epoch:
            return int(ErrorCode.invalid_fetch_session_epoch.value), session.id
        return 0, session.id
    if context.kind == "session_error":
        error_code, session_id, _ = context.respond([])
        return error_code, session_id
    return 0, 0


HANDLER = FetchHandler
