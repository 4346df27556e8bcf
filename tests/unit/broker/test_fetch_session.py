"""The KIP-227 session cache on its own: epochs, contexts, and the three eviction rules, with a
clock the tests move by hand. The same state machine is walked over the wire in
tests/e2e/test_fetch_sessions.py."""

from __future__ import annotations

import random

from kio.schema.errors import ErrorCode

from broker.protocol.fetch_response import PartitionResult
from broker.apis.fetch_session import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    MAX_EPOCH,
    CachedPartition,
    FetchSessionCache,
    FullFetchContext,
    IncrementalFetchContext,
    SessionErrorContext,
    SessionlessFetchContext,
    next_epoch,
)


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        return self.ms


def data(*parts: tuple[str, int, int]) -> dict:
    return {(t, p): CachedPartition(t, None, p, offset, 1000) for t, p, offset in parts}


def answer(context, hw: int = 10, records: bytes = b"", error: int = 0):
    results = [(cp, PartitionResult(cp.partition, error_code=error, high_watermark=hw, last_stable_offset=hw,
                                    log_start_offset=0, records=records))
               for cp in context.partitions()]
    return context.respond(results)


def open_session(cache: FetchSessionCache, n: int = 1, privileged: bool = False, topic: str = "t") -> int:
    ctx = cache.new_context(0, INITIAL_EPOCH, privileged, False, data(*[(topic, p, 0) for p in range(n)]))
    assert isinstance(ctx, FullFetchContext)
    _, session_id, _ = answer(ctx)
    return session_id


def test_epochs_wrap_to_one_and_final_stays_final():
    assert next_epoch(INITIAL_EPOCH) == 1
    assert next_epoch(41) == 42
    assert next_epoch(MAX_EPOCH) == 1
    assert next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_full_request_creates_session_with_random_nonzero_id():
    cache = FetchSessionCache(10, 120_000, clock=Clock(), rng=random.Random(7))
    ids = {open_session(cache) for _ in range(10)}
    assert len(ids) == 10 and 0 not in ids
    assert all(0 < i <= MAX_EPOCH for i in ids)
    assert len(cache) == 10 and cache.partitions_cached == 10
    session = cache.get(next(iter(ids)))
    assert session.epoch == 1


def test_final_epoch_is_sessionless_and_closes_named_session():
    cache = FetchSessionCache(10, 120_000, clock=Clock())
    sid = open_session(cache, 3)
    ctx = cache.new_context(sid, FINAL_EPOCH, False, False, data(("t", 0, 0)))
    assert isinstance(ctx, SessionlessFetchContext)
    assert answer(ctx)[1] == 0
    assert cache.get(sid) is None and cache.partitions_cached == 0
    assert cache.evictions == 0  # closing is not evicting


def test_incremental_sends_only_changes_and_epoch_errors():
    cache = FetchSessionCache(10, 120_000, clock=Clock())
    sid = open_session(cache, 3)
    ctx = cache.new_context(sid, 1, False, False, {})
    assert isinstance(ctx, IncrementalFetchContext) and ctx.skip_unchanged
    err, got_id, sent = answer(ctx, hw=10)
    assert (err, got_id, sent) == (0, sid, [])  # nothing moved since the full response
    err, _, sent = answer(cache.new_context(sid, 2, False, False, {}), hw=11)
    assert [cp.partition for cp, _ in sent] == [0, 1, 2]  # the watermark moved everywhere
    # a stale epoch, a future epoch, an unknown id
    assert isinstance(cache.new_context(sid, 2, False, False, {}), SessionErrorContext)
    assert answer(cache.new_context(sid, 9, False, False, {}))[0] == ErrorCode.invalid_fetch_session_epoch.value
    assert answer(cache.new_context(sid + 1, 1, False, False, {}))[0] == ErrorCode.fetch_session_id_not_found.value
    # the right epoch still works after errors
    assert isinstance(cache.new_context(sid, 3, False, False, {}), IncrementalFetchContext)


def test_incremental_add_update_forget_and_empty_session_ends():
    cache = FetchSessionCache(10, 120_000, clock=Clock())
    sid = open_session(cache, 2)
    ctx = cache.new_context(sid, 1, False, False, data(("t", 1, 5), ("u", 0, 0)), to_forget=[("t", 0)])
    session = cache.get(sid)
    assert list(session.partitions) == [("t", 1), ("u", 0)]
    assert session.partitions[("t", 1)].fetch_offset == 5
    assert cache.partitions_cached == 2
    answer(ctx)
    ctx = cache.new_context(sid, 2, False, False, {}, to_forget=[("t", 1), ("u", 0)])
    assert isinstance(ctx, SessionlessFetchContext)
    assert cache.get(sid) is None and cache.partitions_cached == 0


def test_partition_with_records_moves_to_the_back():
    cache = FetchSessionCache(10, 120_000, clock=Clock())
    sid = open_session(cache, 3)
    ctx = cache.new_context(sid, 1, False, False, {})
    first = next(iter(ctx.partitions()))
    result = PartitionResult(first.partition, high_watermark=10, last_stable_offset=10, log_start_offset=0, records=b"x")
    ctx.respond([(first, result)])
    assert [p for _, p in cache.get(sid).partitions] == [1, 2, 0]


def test_error_is_always_sent_and_resent_when_it_clears():
    cache = FetchSessionCache(10, 120_000, clock=Clock())
    sid = open_session(cache, 1)
    assert len(answer(cache.new_context(sid, 1, False, False, {}), error=6)[2]) == 1
    assert len(answer(cache.new_context(sid, 2, False, False, {}), error=6)[2]) == 1
    assert len(answer(cache.new_context(sid, 3, False, False, {}))[2]) == 1  # cleared: offsets sent again
    assert len(answer(cache.new_context(sid, 4, False, False, {}))[2]) == 0


def test_topic_id_usage_must_match_the_session():
    cache = FetchSessionCache(10, 120_000, clock=Clock())
    sid = open_session(cache, 1)
    assert answer(cache.new_context(sid, 1, False, True, {}))[0] == ErrorCode.fetch_session_topic_id_error.value


def test_full_cache_answers_session_id_zero():
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock=clock)
    open_session(cache, 5)
    open_session(cache, 5)
    assert open_session(cache, 1) == 0
    assert open_session(cache, 5) == 0  # same size, young sessions: nothing may go
    assert len(cache) == 2 and cache.evictions == 0


def test_zero_slots_never_create():
    assert open_session(FetchSessionCache(0, 120_000, clock=Clock())) == 0


def test_rule1_follower_evicts_smallest_consumer():
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock=clock)
    big = open_session(cache, 5)
    small = open_session(cache, 2)
    follower = open_session(cache, 1, privileged=True)
    assert follower != 0
    assert cache.get(small) is None and cache.get(big) is not None
    assert cache.evictions == 1
    # by rule 3 a bigger consumer displaces an old consumer, never a follower (only by rule 2)
    clock.ms += 120_001 - 1000
    cache.touch(cache.get(follower))
    cache.touch(cache.get(big))
    clock.ms += 1000
    bigger = open_session(cache, 100)
    assert bigger != 0 and cache.get(big) is None and cache.get(follower) is not None
    assert open_session(cache, 1000) == 0  # the other consumer session is young


def test_rule2_stale_session_evicted_first_even_if_privileged():
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock=clock)
    follower = open_session(cache, 10, privileged=True)
    clock.ms += 60_000
    consumer = open_session(cache, 10)
    clock.ms += 60_001
    newcomer = open_session(cache, 1)  # the follower's session has been idle > 120 s
    assert newcomer != 0 and cache.get(follower) is None and cache.get(consumer) is not None
    assert cache.evictions == 1


def test_rule3_bigger_session_evicts_old_smaller_one():
    clock = Clock()
    cache = FetchSessionCache(2, 120_000, clock=clock)
    a = open_session(cache, 3)
    b = open_session(cache, 4)
    clock.ms += 100_000
    for s, e in ((a, 1), (b, 1)):  # both in use: none is stale
        answer(cache.new_context(s, e, False, False, {}))
    assert open_session(cache, 10) == 0  # bigger, but the sessions are younger than 120 s
    clock.ms += 20_001
    for s, e in ((a, 2), (b, 2)):
        answer(cache.new_context(s, e, False, False, {}))
    assert open_session(cache, 3) == 0  # older now, but not smaller than the newcomer
    c = open_session(cache, 5)
    assert c != 0 and cache.get(a) is None and cache.get(b) is not None  # the smallest goes
    assert cache.evictions == 1 and cache.partitions_cached == 4 + 5


def test_epoch_checked_again_when_response_is_built():
    cache = FetchSessionCache(10, 120_000, clock=Clock())
    sid = open_session(cache, 1)
    slow = cache.new_context(sid, 1, False, False, {})
    answer(cache.new_context(sid, 2, False, False, {}))  # overtook it (a retry on another connection)
    assert answer(slow)[0] == ErrorCode.invalid_fetch_session_epoch.value
