"""KIP-227 incremental fetch sessions: the session cache, its eviction rules, and the fetch contexts.

A fetcher of many partitions opens a session with a full FetchRequest (session id 0, epoch 0);
the broker caches what the request said about each partition (fetch offset, max bytes) and what
the response said (high watermark, last stable offset, log start offset) and answers with a random
session id. Each later request names the session and its next epoch and carries only the
partitions that changed (added or with a new fetch offset / max bytes) plus `forgotten_topics_data`
for those removed; the response carries only partitions with something new: records, a moved
high watermark / last stable offset / log start offset, or an error.

Request metadata (session id, epoch), as the KIP's table reads:

    id 0,  epoch -1 (FINAL)    full request, no session (what pre-KIP-227 fetchers send)
    id 0,  epoch 0 (INITIAL)   full request; create a session if the cache has room
    id N,  epoch 0             close session N, full request, create a new session
    id N,  epoch -1            close session N, full request, no new session
    id N,  epoch E > 0         incremental request if E is the epoch N expects
                               (else INVALID_FETCH_SESSION_EPOCH; FETCH_SESSION_ID_NOT_FOUND if
                               there is no session N)

The cache holds at most `max.incremental.fetch.session.cache.slots` sessions. When it is full, a
new session evicts an existing one if and only if (the KIP's three rules)

  1. the new session is privileged (a follower's) and the existing one is not (a consumer's), or
  2. the existing one has been unused for longer than the eviction time, or
  3. the existing one is older than the eviction time and the new one has more partitions,

where, as in Kafka, rule 3 ranks sessions by (privileged, partitions): a consumer never displaces a
follower's session except by rule 2. Otherwise the answer carries session id 0 (sessionless).

This module knows nothing about consumers or logs: a fetch path (the Fetch handler today, the
replica fetcher's leader side later) asks `FetchSessionCache.new_context` for a context, reads the
partitions the context lists, and hands the results back to the context, which decides what goes
into the response and which session id it carries.
"""

from __future__ import annotations

import random
import time
import uuid
from collections import OrderedDict
from typing import Callable, Hashable, Iterable, Iterator

from kio.schema.errors import ErrorCode

from broker.protocol.fetch_response import PartitionResult
from broker.protocol.fetch_session_ids import (FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID,  # noqa: F401
                                              MAX_EPOCH, next_epoch)

#: A partition inside a session: (topic id, partition) when the session uses topic ids (Fetch v13+),
#: (topic name, partition) below v13. Topic ids are keyed by their 128-bit integer: a uuid's own
#: hash is Python code, and a full fetch of 10,000 partitions would run it 10,000 times.
PartitionKey = tuple[Hashable, int]


def topic_key(topic_id: uuid.UUID | None) -> int:
    return topic_id.int if topic_id is not None else 0


def now_ms() -> int:
    return int(time.monotonic() * 1000)


class CachedPartition:
    """What a session remembers of one partition: the fetcher's request parameters, and the
    offsets last sent to it (-1: never sent), so an incremental response can leave it out until
    one of them moves or data arrives."""

    __slots__ = ("topic", "topic_id", "partition", "tp", "fetch_offset", "fetcher_log_start_offset", "max_bytes",
                 "high_watermark", "last_stable_offset", "log_start_offset", "current_leader_epoch")

    def __init__(self, topic: str | None, topic_id: uuid.UUID | None, partition: int, fetch_offset: int,
                 max_bytes: int, fetcher_log_start_offset: int = -1, current_leader_epoch: int = -1) -> None:
        self.topic = topic  # None while a topic id is unknown here
        self.topic_id = topic_id
        self.partition = partition
        self.tp = (topic, partition)  # the log's (topic, partition) key, made once
        self.fetch_offset = fetch_offset
        self.fetcher_log_start_offset = fetcher_log_start_offset
        self.max_bytes = max_bytes
        self.current_leader_epoch = current_leader_epoch  # -1: not checked (before v9, or not sent)
        self.high_watermark = -1
        self.last_stable_offset = -1
        self.log_start_offset = -1

    def resolve(self, topic: str | None) -> None:
        """The name of a topic id that was unknown when the partition was cached."""
        self.topic = topic
        self.tp = (topic, self.partition)

    def update_request(self, other: "CachedPartition") -> None:
        """An incremental request named this partition again: take its new parameters."""
        self.fetch_offset = other.fetch_offset
        self.fetcher_log_start_offset = other.fetcher_log_start_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch

    def nothing_new(self, high_watermark: int, last_stable_offset: int, log_start_offset: int) -> bool:
        """True when a read could return no records and no offset the fetcher has not seen:
        the fast path that lets an idle partition of a large session cost a few comparisons."""
        return (self.fetch_offset == high_watermark and high_watermark == self.high_watermark
                and last_stable_offset == self.last_stable_offset and log_start_offset == self.log_start_offset)

    def must_respond(self, result: PartitionResult, update: bool) -> bool:
        """Whether `result` tells the fetcher something new (records, moved offsets, an error);
        with `update`, remember the offsets as sent."""
        # New records, and a preferred read replica (KIP-392), are always sent.
        respond = result.records_size > 0 or result.preferred_read_replica >= 0
        if result.error_code != 0:
            # Errors are always sent; forgetting the watermark makes the partition be sent again
            # once the error goes away.
            if update:
                self.high_watermark = -1
            return True
        if (self.high_watermark != result.high_watermark or self.last_stable_offset != result.last_stable_offset
                or self.log_start_offset != result.log_start_offset):
            respond = True
            if update:
                self.high_watermark = result.high_watermark
                self.last_stable_offset = result.last_stable_offset
                self.log_start_offset = result.log_start_offset
        return respond

    def __repr__(self) -> str:
        return (f"CachedPartition({self.topic or self.topic_id}-{self.partition}, fetch_offset={self.fetch_offset}, "
                f"max_bytes={self.max_bytes}, hw={self.high_watermark}, lso={self.last_stable_offset}, "
                f"log_start={self.log_start_offset})")


class FetchSession:
    """One fetcher's session: its id, the epoch it expects next, whether it is privileged (a
    follower's), when it was created and last used, and its partitions in response order (a
    partition that returned records moves to the back, so none starves under max_bytes)."""

    __slots__ = ("id", "privileged", "uses_topic_ids", "created_ms", "last_used_ms", "epoch", "partitions")

    def __init__(self, session_id: int, privileged: bool, uses_topic_ids: bool, now: int,
                 partitions: dict[PartitionKey, CachedPartition]) -> None:
        self.id = session_id
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids
        self.created_ms = now
        self.last_used_ms = now
        self.epoch = next_epoch(INITIAL_EPOCH)
        # A plain dict keeps insertion order and, unlike OrderedDict, iterates its values without
        # hashing every key again (a uuid's hash is Python code: that was most of an idle fetch).
        self.partitions = partitions

    def move_to_back(self, key: PartitionKey) -> None:
        cp = self.partitions.pop(key, None)
        if cp is not None:
            self.partitions[key] = cp

    @property
    def size(self) -> int:
        return len(self.partitions)

    def update(self, fetch_data: dict[PartitionKey, CachedPartition], to_forget: Iterable[PartitionKey]) -> None:
        """Apply an incremental request: add or update the partitions it names, drop the forgotten."""
        for key, requested in fetch_data.items():
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = requested
            else:
                cached.update_request(requested)
        for key in to_forget:
            self.partitions.pop(key, None)

    def __repr__(self) -> str:
        return (f"FetchSession(id={self.id}, privileged={self.privileged}, partitions={self.size}, "
                f"epoch={self.epoch}, created_ms={self.created_ms}, last_used_ms={self.last_used_ms})")


def key_of(cp: CachedPartition, uses_topic_ids: bool) -> PartitionKey:
    return (topic_key(cp.topic_id) if uses_topic_ids else cp.topic, cp.partition)


# -- fetch contexts: what to read for one request, and what to answer ---------------------------


class FetchContext:
    """How one FetchRequest relates to sessions. The fetch path reads `partitions()` (skipping, when
    `skip_unchanged` is set, those whose `nothing_new` holds) and passes every result it produced to
    `respond`, which returns (top-level error code, session id, the results to send)."""

    kind = ""
    skip_unchanged = False

    def partitions(self) -> Iterable[CachedPartition]:
        return ()

    def respond(self, results: list[tuple[CachedPartition, PartitionResult]]
                ) -> tuple[int, int, list[tuple[CachedPartition, PartitionResult]]]:
        raise NotImplementedError


class SessionErrorContext(FetchContext):
    """The request named a session we cannot use: answer the error alone (which partitions it
    wanted is unknown), with session id 0."""

    kind = "session_error"

    def __init__(self, error: ErrorCode) -> None:
        self.error = error

    def respond(self, results):
        return int(self.error.value), INVALID_SESSION_ID, []


class SessionlessFetchContext(FetchContext):
    """A full request that neither uses nor creates a session."""

    kind = "sessionless"

    def __init__(self, fetch_data: dict[PartitionKey, CachedPartition]) -> None:
        self.fetch_data = fetch_data

    def partitions(self) -> Iterable[CachedPartition]:
        return self.fetch_data.values()

    def respond(self, results):
        return 0, INVALID_SESSION_ID, results


class FullFetchContext(FetchContext):
    """A full request that may open a session: once the response is known, the cache is asked for
    a slot (the session caches the offsets this response sends)."""

    kind = "full"

    def __init__(self, cache: "FetchSessionCache", fetch_data: dict[PartitionKey, CachedPartition],
                 privileged: bool, uses_topic_ids: bool) -> None:
        self.cache = cache
        self.fetch_data = fetch_data
        self.privileged = privileged
        self.uses_topic_ids = uses_topic_ids

    def partitions(self) -> Iterable[CachedPartition]:
        return self.fetch_data.values()

    def respond(self, results):
        for cp, result in results:
            cp.must_respond(result, update=True)
        session_id = self.cache.maybe_create(self.privileged, self.uses_topic_ids, self.fetch_data)
        return 0, session_id, results


class IncrementalFetchContext(FetchContext):
    """An incremental request on a live session: read every partition of the session, answer
    only those with something new."""

    kind = "incremental"
    skip_unchanged = True

    def __init__(self, session: FetchSession, expected_epoch: int) -> None:
        self.session = session
        self.expected_epoch = expected_epoch

    def partitions(self) -> Iterable[CachedPartition]:
        return self.session.partitions.values()

    def respond(self, results):
        session = self.session
        if session.epoch != self.expected_epoch:
            # Another request on this session ran while this one waited: a duplicate or a retry.
            return int(ErrorCode.invalid_fetch_session_epoch.value), session.id, []
        sent = []
        for cp, result in results:
            if cp.must_respond(result, update=True):
                sent.append((cp, result))
                if result.records_size > 0:
                    session.move_to_back(key_of(cp, session.uses_topic_ids))
        return 0, session.id, sent


# -- the cache ------------------------------------------------------------------------------------

#: Why a session was evicted (the `reason` label of the evictions metric): unused for longer than
#: the eviction time (rule 2), a follower taking a consumer's slot (rule 1), or a session with more
#: partitions taking an old smaller one's (rule 3).
EVICT_IDLE, EVICT_FOR_FOLLOWER, EVICT_FOR_LARGER = "idle", "follower", "larger"
EVICTION_REASONS = (EVICT_IDLE, EVICT_FOR_FOLLOWER, EVICT_FOR_LARGER)


class FetchSessionCache:
    """The broker's fetch sessions, at most `max_slots` of them, evicted by the KIP's rules.

    Sessions are kept in least-recently-used order, so rule 2 looks at one session; rules 1 and 3
    scan the cache, which happens only when it is full and nothing in it is stale.
    """

    def __init__(self, max_slots: int, eviction_ms: int, clock: Callable[[], int] = now_ms,
                 rng: random.Random | None = None) -> None:
        self.max_slots = max_slots
        self.eviction_ms = eviction_ms
        self.clock = clock
        self._rng = rng or random.SystemRandom()
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()  # least recently used first
        self.partitions_cached = 0
        self.evictions = 0
        #: called with the evicted session and why (one of EVICTION_REASONS, for metrics);
        #: closing one's own session is not an eviction
        self.on_eviction: Callable[[FetchSession, str], None] | None = None

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self._sessions.get(session_id)

    def sessions(self) -> Iterator[FetchSession]:
        return iter(self._sessions.values())

    # -- requests -> contexts ------------------------------------------------------------------

    def new_context(self, session_id: int, epoch: int, privileged: bool, uses_topic_ids: bool,
                    fetch_data: dict[PartitionKey, CachedPartition],
                    to_forget: Iterable[PartitionKey] = ()) -> FetchContext:
        """The context of one FetchRequest, by the KIP's table of (session id, epoch)."""
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full request closes the session it names
            if epoch == FINAL_EPOCH:
                return SessionlessFetchContext(fetch_data)
            return FullFetchContext(self, fetch_data, privileged, uses_topic_ids)
        session = self._sessions.get(session_id)
        if session is None:
            return SessionErrorContext(ErrorCode.fetch_session_id_not_found)
        if session.epoch != epoch:
            return SessionErrorContext(ErrorCode.invalid_fetch_session_epoch)
        if session.uses_topic_ids != uses_topic_ids:
            return SessionErrorContext(ErrorCode.fetch_session_topic_id_error)
        before = session.size
        session.update(fetch_data, to_forget)
        self.partitions_cached += session.size - before
        if not session.partitions:
            # Everything was forgotten: the session ends, this request is answered sessionless.
            self.remove(session_id)
            return SessionlessFetchContext(fetch_data)
        self.touch(session)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetchContext(session, session.epoch)

    # -- slots ---------------------------------------------------------------------------------

    def maybe_create(self, privileged: bool, uses_topic_ids: bool,
                     partitions: dict[PartitionKey, CachedPartition]) -> int:
        """A new session holding `partitions`, if there is a free slot or one may be freed by
        eviction; its id, or INVALID_SESSION_ID (0) when the cache keeps what it has."""
        now = self.clock()
        if len(self._sessions) >= self.max_slots and not self._try_evict(privileged, len(partitions), now):
            return INVALID_SESSION_ID
        session = FetchSession(self._new_session_id(), privileged, uses_topic_ids, now, dict(partitions))
        self._sessions[session.id] = session
        self.partitions_cached += session.size
        return session.id

    def _new_session_id(self) -> int:
        while True:
            candidate = self._rng.randint(1, MAX_EPOCH)  # positive, never 0 (INVALID_SESSION_ID)
            if candidate not in self._sessions:
                return candidate

    def _try_evict(self, privileged: bool, size: int, now: int) -> bool:
        if not self._sessions:
            return False
        # Rule 2: the least recently used session, if it has been idle past the eviction time.
        stalest = next(iter(self._sessions.values()))
        if now - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest, EVICT_IDLE)
            return True
        # Rules 1 and 3: the least valuable session the newcomer outranks, consumers and small first.
        newcomer = (privileged, size)
        victim = None
        for s in self._sessions.values():
            if (privileged and not s.privileged) or (now - s.created_ms > self.eviction_ms and newcomer > (s.privileged, s.size)):
                if victim is None or (s.privileged, s.size) < (victim.privileged, victim.size):
                    victim = s
        if victim is None:
            return False
        self._evict(victim, EVICT_FOR_FOLLOWER if privileged and not victim.privileged else EVICT_FOR_LARGER)
        return True

    def _evict(self, session: FetchSession, reason: str) -> None:
        self.remove(session.id)
        self.evictions += 1
        if self.on_eviction is not None:
            self.on_eviction(session, reason)

    def touch(self, session: FetchSession) -> None:
        session.last_used_ms = self.clock()
        self._sessions.move_to_end(session.id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            self.partitions_cached -= session.size
        return session

    def clear(self) -> None:
        self._sessions.clear()
        self.partitions_cached = 0
