"""Controlled shutdown: which leaderships a stopping broker waits to see moved, and the wait
ending when nothing more can move (issue 18, item 12)."""

from __future__ import annotations

import asyncio
import dataclasses

from broker.metadata.store import BrokerRegistration, MetadataImage, PartitionState, new_topic
from broker.server.controlled_shutdown import hand_over, movable_leaderships


def reg(n: int, stopping: bool = False) -> BrokerRegistration:
    return BrokerRegistration(n, f"i{n}", (), shutting_down=stopping)


def image(states, brokers) -> MetadataImage:
    topic = dataclasses.replace(new_topic("t", len(states), 3), assignment=tuple(states))
    return MetadataImage.build("c", {b.node_id: b for b in brokers}, 2, {"t": topic})


def test_only_leaderships_an_eligible_in_sync_replica_can_take_are_waited_for():
    states = [PartitionState(1, 0, (1, 2, 3), (1, 2, 3)),  # 2 and 3 can take it
              PartitionState(1, 0, (1, 2, 3), (1,)),  # alone in the ISR: stays until it stops
              PartitionState(2, 0, (2, 1, 3), (2, 1, 3)),  # not led here
              PartitionState(1, 0, (1, 3, 2), (1, 3))]  # 3 is stopping too: nobody
    img = image(states, [reg(1, True), reg(2), reg(3, True)])
    assert movable_leaderships(img, 1) == ["t-0"]
    everyone = image(states, [reg(1, True), reg(2, True), reg(3, True)])
    assert movable_leaderships(everyone, 1) == []


class HandingOverStore:
    """The controller's answer to the announcement arrives as a newer image."""

    def __init__(self, before: MetadataImage, after: MetadataImage) -> None:
        self.image, self.after, self.announced = before, after, False

    async def announce_shutdown(self) -> None:
        self.announced = True
        asyncio.get_running_loop().call_later(0.3, lambda: setattr(self, "image", self.after))


async def test_the_wait_ends_when_the_controller_moved_the_leadership():
    led = PartitionState(1, 0, (1, 2, 3), (1, 2, 3))
    moved = PartitionState(2, 1, (1, 2, 3), (2, 3))
    brokers = [reg(1, True), reg(2), reg(3)]
    store = HandingOverStore(image([led], brokers), image([moved], brokers))
    assert await hand_over(store, 1, timeout_s=30) == []
    assert store.announced


async def test_the_wait_is_bounded_when_nobody_moves_it():
    led = PartitionState(1, 0, (1, 2, 3), (1, 2, 3))
    brokers = [reg(1, True), reg(2), reg(3)]
    store = HandingOverStore(image([led], brokers), image([led], brokers))
    assert await hand_over(store, 1, timeout_s=0.5) == ["t-0"]
