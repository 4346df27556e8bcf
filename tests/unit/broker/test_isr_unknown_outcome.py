"""An ISR write whose outcome is unknown is taken as possibly committed (issue 35).

The loss it prevents: a leader expands its ISR [1, 3] to [1, 2, 3]; the API server commits the
write but the answer never arrives (a timeout, a connection cut mid-write, a 5xx after commit).
Taking that as "not written" let the leader go on acknowledging acks=all writes with [1, 3]
while the store said broker 2 was in sync; when the controller later elected 2, the leader
truncated acknowledged records. Now the proposal stays pending (the high watermark counts the
maximal ISR, 2 included) and the change is written again until the record shows which ISR holds.

Real logs in a temporary directory and ReplicaManager itself; the store is the part of one that
ReplicaManager uses, with the API server's faults played in `update_topic`.
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from kio.schema.errors import ErrorCode
from kubernetes_asyncio.client.exceptions import ApiException

from broker.metadata import kube_api
from broker.metadata.store import Conflict, MetadataError, PartitionState, StoreUnavailable
from broker.replica import isr_updates, replica_manager
from broker.replica.delayed_produce import DelayedProduce
from tests.unit.broker.test_replica_roles import (TOPIC_ID, ImageStore, batch, leave_follower_3_behind, manager,
                                                  topic)


class FaultyStore(ImageStore):
    """`mode` says what the next writes meet: "answer-lost" commits then raises (the leader's
    view, its image, stays where it was: its watch is cut too), "5xx-after-commit" commits then
    answers 500 (raised through the Kubernetes client's own error mapping), "cut" raises without
    committing, "ok" writes and shows the record at once."""

    def __init__(self, *a, **kw) -> None:
        super().__init__(*a, **kw)
        self.mode = "ok"
        self.committed = self.image.topics["t"]  # what the API server holds
        self.attempts = 0

    async def update_topic(self, rec):
        self.attempts += 1
        if rec.version != self.committed.version:
            raise Conflict(f"version {rec.version} is not {self.committed.version}")
        if self.mode == "cut":
            raise StoreUnavailable("Kubernetes API unreachable: connection reset")
        rec = dataclasses.replace(rec, version=int(rec.version) + 1)
        self.committed = rec
        self.writes.append(rec)
        if self.mode == "answer-lost":
            raise StoreUnavailable("Kubernetes API unreachable: timed out")
        if self.mode == "5xx-after-commit":
            await kube_api.call(_answer_500())
        self.set(rec)
        return rec

    def heal(self) -> None:
        """The API server answers again and the watch delivers what it holds."""
        self.mode = "ok"
        self.set(self.committed)


async def _answer_500():
    raise ApiException(status=500, reason="Internal Server Error")


async def until(predicate, timeout: float = 5.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def expanding_leader(tmp_path, mode: str):
    """Leader 1 of replicas (1, 2, 3) with ISR [1, 3]; follower 2 catches up and its expansion
    is written under `mode`. Returns the store, the manager and the partition."""
    store = FaultyStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 3)), **{"min.insync.replicas": "2"}))
    rm = manager(tmp_path, store)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    payload, headers = batch(2)
    rm.append(part, payload, headers)
    rm.follower_fetched(part, 3, 2, 0, 0)
    assert part.log.high_watermark == 2
    store.mode = mode
    rm.follower_fetched(part, 2, 2, 0, 0)  # caught up: proposes [1, 2, 3]
    await until(lambda: store.attempts >= 1)
    await asyncio.sleep(0.05)
    return store, rm, part


async def acks_all_write(rm, part) -> tuple[DelayedProduce, asyncio.Future]:
    payload, headers = batch(3)
    result = rm.append(part, payload, headers)
    op = DelayedProduce(rm, {("t", 0): (part, 0, result.last_offset + 1)})
    waiting = asyncio.ensure_future(rm.produce_purgatory.wait(op, [("t", 0)], 5))
    await asyncio.sleep(0)
    return op, waiting


@pytest.mark.parametrize("mode", ["answer-lost", "5xx-after-commit"])
async def test_an_expansion_committed_but_unanswered_keeps_the_follower_counted_until_the_record_shows_it(tmp_path, mode):
    store, rm, part = await expanding_leader(tmp_path, mode)
    rs = part.replica_state
    assert store.committed.assignment[0].isr == (1, 2, 3)  # the API server holds the expansion
    assert rs.pending_isr == frozenset({1, 2, 3}), "an unknown outcome must leave the proposal pending"
    # Follower 2 stops fetching (cut again), 3 keeps up: an acks=all write must not be answered,
    # as the store names 2 in sync and the controller may elect it.
    op, waiting = await acks_all_write(rm, part)
    rm.follower_fetched(part, 3, 5, 0, 0)
    await asyncio.sleep(0.05)
    assert part.log.high_watermark == 2 and not op.completed, \
        "acknowledged without broker 2, which the stored ISR holds"
    assert rm.isr_writes_unknown >= 1
    # The answer path heals: the record shows the expansion, and the leader settles on it.
    store.heal()
    await until(lambda: rs.pending_isr is None)
    assert rs.isr == frozenset({1, 2, 3})
    assert len(store.writes) == 1, "the change was committed once, not written twice"
    rm.follower_fetched(part, 2, 5, 0, 0)
    assert await waiting and op.results == {("t", 0): ErrorCode.none}
    rm.close()


async def test_an_expansion_cut_mid_write_is_written_again_once_the_api_server_answers(tmp_path):
    store, rm, part = await expanding_leader(tmp_path, "cut")
    rs = part.replica_state
    assert store.committed.assignment[0].isr == (1, 3)
    assert rs.pending_isr == frozenset({1, 2, 3})
    op, waiting = await acks_all_write(rm, part)
    rm.follower_fetched(part, 3, 5, 0, 0)
    await asyncio.sleep(0.05)
    assert not op.completed  # broker 2 might be in the stored ISR: it still counts
    store.heal()
    await until(lambda: rs.pending_isr is None)
    assert rs.isr == frozenset({1, 2, 3}) and store.committed.assignment[0].isr == (1, 2, 3)
    rm.follower_fetched(part, 2, 5, 0, 0)
    assert await waiting and op.results == {("t", 0): ErrorCode.none}
    rm.close()


async def test_a_shrink_with_an_unknown_outcome_keeps_waiting_for_the_removed_follower(tmp_path):
    """The maximal ISR of a pending shrink is the old ISR: the follower being removed still holds
    the high watermark back until the record shows it gone."""
    store = FaultyStore(topic(PartitionState(1, 0, (1, 2, 3), (1, 2, 3))))
    rm = manager(tmp_path, store, lag_ms=50)
    rm.apply_image(store.image)
    part = rm.get("t", 0)
    await leave_follower_3_behind(rm, part)
    store.mode = "answer-lost"
    rm.shrink_isrs()
    await until(lambda: store.attempts >= 1)
    rs = part.replica_state
    assert rs.pending_isr == frozenset({1, 2}) and part.log.high_watermark == 0
    store.heal()
    await until(lambda: rs.pending_isr is None)
    assert rs.isr == frozenset({1, 2}) and part.log.high_watermark == 2
    rm.close()


class AnsweringStore(FaultyStore):
    def __init__(self, *a, error: Exception | None = None, **kw) -> None:
        super().__init__(*a, **kw)
        self.error = error

    async def update_topic(self, rec):
        self.attempts += 1
        if self.error is not None:
            raise self.error
        return await super().update_topic(rec)


async def test_write_isr_names_each_outcome(monkeypatch):
    monkeypatch.setattr(isr_updates, "RETRY_S", 0.001)
    state = PartitionState(1, 0, (1, 2, 3), (1, 3))

    async def write(error):
        store = AnsweringStore(topic(state), error=error)
        return await isr_updates.write_isr(store, "t", TOPIC_ID, 0, 1, 0, frozenset({1, 2, 3}), frozenset({1, 3}))

    assert await write(None) == frozenset({1, 2, 3})
    assert await write(StoreUnavailable("Kubernetes API: 500 Internal Server Error")) is isr_updates.UNKNOWN
    # Every compare-and-set lost: one of the newer versions may be an earlier attempt of ours.
    assert await write(Conflict("changed")) is isr_updates.UNKNOWN
    # A refusal (4xx) is certain: nothing was written.
    assert await write(MetadataError("updating KafkaTopic x: 422 Unprocessable Entity")) is None


def test_the_retry_backs_off_within_bounds():
    assert 0 < replica_manager.ISR_RETRY_MIN_S < replica_manager.ISR_RETRY_MAX_S <= 5
