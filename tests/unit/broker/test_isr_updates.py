"""A leader's ISR change after a lost compare-and-set: recomputed from the newer record, never
undoing the controller's change, never adding a broker whose registration is not live (issue 18,
item 6)."""

from __future__ import annotations

import dataclasses
import uuid

from broker.metadata.store import BrokerRegistration, Conflict, MetadataImage, PartitionState, TopicRecord
from broker.replica import isr_updates
from broker.replica.isr_updates import recompute

TOPIC_ID = uuid.uuid4()


def state(isr, leader=1, replicas=(1, 2, 3, 4)) -> PartitionState:
    return PartitionState(leader, 5, tuple(replicas), tuple(isr))


def test_an_expand_applied_to_a_newer_isr_keeps_the_controllers_removal():
    # proposed from {1,2,3}: add 4; meanwhile the controller removed 3
    assert recompute(state((1, 2)), frozenset({1, 2, 3}), frozenset({1, 2, 3, 4}), {1, 2, 4}) == (1, 2, 4)


def test_a_shrink_applied_to_a_newer_isr_keeps_what_another_writer_did():
    # proposed from {1,2,3}: remove 2; meanwhile the controller removed 3
    assert recompute(state((1, 3)), frozenset({1, 2, 3}), frozenset({1, 3}), {1, 2, 3}) == (1, 3)
    assert recompute(state((1, 2)), frozenset({1, 2, 3}), frozenset({1, 3}), {1, 2}) == (1,)


def test_a_broker_that_is_not_live_is_never_added_and_the_leader_never_removed():
    assert recompute(state((1, 2)), frozenset({1, 2}), frozenset({1, 2, 3}), {1, 2}) == (1, 2)
    assert recompute(state((1, 2)), frozenset({1, 2}), frozenset({2}), {1, 2}) == (1, 2)
    # not a replica: not added either
    assert recompute(state((1, 2), replicas=(1, 2, 3)), frozenset({1, 2}), frozenset({1, 2, 9}), {1, 2, 9}) == (1, 2)


def test_the_isr_is_listed_in_assignment_order():
    assert recompute(state((3, 1), replicas=(3, 1, 2)), frozenset({3, 1}), frozenset({1, 2, 3}), {1, 2, 3}) == (3, 1, 2)


class RacingStore:
    """Loses the first compare-and-set: the controller wrote `newer` first."""

    def __init__(self, current: PartitionState, newer: PartitionState, live) -> None:
        self.brokers = {n: BrokerRegistration(n, "x", ()) for n in live}
        self.image = self._image(current, 0)
        self.newer = newer
        self.writes: list[tuple[int, ...]] = []

    def _image(self, s: PartitionState, version: int) -> MetadataImage:
        rec = TopicRecord("t", TOPIC_ID, 1, 4, {}, (s,), version)
        return MetadataImage.build("c", self.brokers, 1, {"t": rec})

    async def update_topic(self, rec: TopicRecord) -> TopicRecord:
        if self.newer is not None:
            self.image, self.newer = self._image(self.newer, 1), None
            raise Conflict("the controller wrote first")
        self.writes.append(rec.assignment[0].isr)
        rec = dataclasses.replace(rec, version=int(rec.version) + 1)
        self.image = MetadataImage.build("c", self.brokers, 1, {"t": rec})
        return rec


async def test_a_retry_after_a_conflict_does_not_re_add_the_broker_the_controller_removed():
    store = RacingStore(state((1, 2, 3)), newer=state((1, 2)), live=(1, 2, 4))
    base, proposed = frozenset({1, 2, 3}), frozenset({1, 2, 3, 4})
    result = await isr_updates.write_isr(store, "t", TOPIC_ID, 0, 1, 5, proposed, base)
    assert store.writes == [(1, 2, 4)]
    assert result == frozenset({1, 2, 4})


async def test_a_retry_with_nothing_left_to_change_writes_nothing():
    # proposed: remove 3; the controller removed it first
    store = RacingStore(state((1, 2, 3)), newer=state((1, 2)), live=(1, 2))
    result = await isr_updates.write_isr(store, "t", TOPIC_ID, 0, 1, 5, frozenset({1, 2}), frozenset({1, 2, 3}))
    assert store.writes == [] and result == frozenset({1, 2})
