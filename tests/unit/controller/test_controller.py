"""The controller's loop over a store: acts only while it holds the Lease, completes topics,
retries lost CAS writes and an unreachable store. The store here is the file backend, with
campaign/availability switched by the test (a stand-in for the Lease; the Kubernetes backend is
exercised end to end in tests/e2e/test_cluster.py)."""

from __future__ import annotations

import asyncio
import dataclasses
import time

import pytest

from broker.controller.controller import Controller
from broker.metadata.file_store import FileMetadataStore
from broker.metadata.store import (BrokerRegistration, Endpoint, MetadataImage, PartitionState, StoreUnavailable,
                                   new_topic)


class SwitchableStore(FileMetadataStore):
    def __init__(self, directory, cluster_id):
        super().__init__(directory, cluster_id)
        self.leader = True
        self.down = False
        self.updates = 0

    async def campaign(self, node_id):
        if self.down:
            raise StoreUnavailable("api server down")
        if not self.leader:
            self._controller = None
            return False
        return await super().campaign(node_id)

    def is_controller(self, node_id):
        return self.leader and super().is_controller(node_id)

    async def update_topic(self, rec):
        if self.down:
            raise StoreUnavailable("api server down")
        self.updates += 1
        return await super().update_topic(rec)


def reg(node_id):
    return BrokerRegistration(node_id, f"inc-{node_id}", (Endpoint("PLAINTEXT", "127.0.0.1", 9000 + node_id),))


async def until(cond, timeout=5.0):
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.01)


@pytest.fixture
async def setup(tmp_path):
    store = SwitchableStore(tmp_path, "c")
    for n in (1, 2, 3):
        await store.register_broker(reg(n))
    controller = Controller(store, node_id=1, campaign_interval_s=0.05)
    controller.start()
    yield store, controller
    await controller.stop()


async def test_assigns_new_topics_across_live_brokers(setup):
    store, controller = setup
    await store.create_topic(new_topic("orders", 12))
    await until(lambda: store.image.topics["orders"].assignment is not None)
    leaders = {s.leader for s in store.image.topics["orders"].assignment}
    assert leaders == {1, 2, 3}


async def test_a_controller_without_the_lease_writes_nothing(setup):
    store, controller = setup
    await until(lambda: controller.active)
    store.leader = False
    await until(lambda: not controller.active)
    before = store.updates
    await store.create_topic(new_topic("later", 2))
    await asyncio.sleep(0.3)
    assert store.image.topics["later"].assignment is None and store.updates == before
    store.leader = True
    await until(lambda: store.image.topics["later"].assignment is not None)


async def test_store_outage_is_retried_until_it_returns(setup):
    store, controller = setup
    await until(lambda: controller.active)
    store.down = True
    # The topic object was written before the outage; the controller's write fails meanwhile.
    await FileMetadataStore.create_topic(store, new_topic("during", 3))
    await asyncio.sleep(0.3)
    assert store.image.topics["during"].assignment is None
    store.down = False
    await until(lambda: store.image.topics["during"].assignment is not None, timeout=10)


async def test_leadership_moves_off_an_expired_broker_and_back(setup):
    store, controller = setup
    await store.create_topic(new_topic("t", 3))
    await until(lambda: store.image.topics["t"].assignment is not None)
    on_2 = [i for i, s in enumerate(store.image.topics["t"].assignment) if s.leader == 2]
    assert on_2
    del store._brokers[2]  # its Lease expired
    await store.register_broker(reg(1))  # publish an image without broker 2
    await until(lambda: all(store.image.topics["t"].assignment[i].leader == -1 for i in on_2))
    epochs = [store.image.topics["t"].assignment[i].leader_epoch for i in on_2]
    assert epochs == [1] * len(on_2)
    await store.register_broker(reg(2))
    await until(lambda: all(store.image.topics["t"].assignment[i].leader == 2 for i in on_2))
    assert [store.image.topics["t"].assignment[i].leader_epoch for i in on_2] == [2] * len(on_2)


async def test_a_topic_made_without_an_id_gets_one_with_its_assignment(setup):
    import dataclasses

    from broker.metadata.store import NO_TOPIC_ID

    store, controller = setup
    await store.create_topic(dataclasses.replace(new_topic("from-kubectl", 2), topic_id=NO_TOPIC_ID))
    await until(lambda: store.image.topics["from-kubectl"].assignment is not None)
    assert store.image.topics["from-kubectl"].topic_id != NO_TOPIC_ID


async def test_a_replication_factor_above_the_brokers_is_reported_then_cleared(setup):
    """Kafka's INVALID_REPLICATION_FACTOR as the topic's problem (a KafkaTopic's Ready=False), not
    only a log line; once enough brokers are live the topic is assigned and the problem goes."""
    store, controller = setup
    await store.create_topic(new_topic("wide", 2, replication_factor=4))
    await until(lambda: store.image.topics["wide"].problem is not None)
    reason, message = store.image.topics["wide"].problem
    assert reason == "InvalidReplicationFactor" and "replication factor 4 is larger than the 3" in message
    assert store.image.topics["wide"].assignment is None
    writes = store.updates
    await asyncio.sleep(0.3)
    assert store.updates == writes  # written once, not at every turn
    await store.register_broker(reg(4))
    await until(lambda: store.image.topics["wide"].assignment is not None)
    assert store.image.topics["wide"].problem is None


async def test_a_topic_whose_spec_kafka_refuses_is_not_created(setup):
    import dataclasses

    from broker.metadata.store import NO_TOPIC_ID

    store, controller = setup
    await until(lambda: controller.active)
    bad = dataclasses.replace(new_topic("bad", 1), topic_id=NO_TOPIC_ID, problem=("InvalidConfig", "spec.config: x"))
    await store.create_topic(bad)
    await store.create_topic(new_topic("good", 1))
    await until(lambda: store.image.topics["good"].assignment is not None)
    assert store.image.topics["bad"].assignment is None and store.image.topics["bad"].problem[0] == "InvalidConfig"


class ViewStore(SwitchableStore):
    """A store whose view became current at `current_from` (monotonic; None: stale now)."""

    current_from: float | None = float("-inf")

    def current_since(self):
        return self.current_from

    async def lapse(self, node_id):
        """Broker `node_id`'s Lease is judged expired (it drops out of the image)."""
        del self._brokers[node_id]
        self._publish(MetadataImage.build(self.cluster_id, self._brokers, self._controller, self.image.topics))


async def led_by_2(tmp_path, current_from):
    store = ViewStore(tmp_path, "c")
    store.current_from = current_from
    for n in (1, 2, 3):
        await store.register_broker(reg(n))
    await store.create_topic(new_topic("t", 1))
    rec = store.image.topics["t"]
    await store.update_topic(dataclasses.replace(rec, assignment=(PartitionState(2, 0, (2, 3, 1), (2, 3, 1)),)))
    await store.lapse(2)
    return store


async def test_a_new_controller_whose_view_was_current_for_a_lease_acts_on_an_expired_lease_at_once(tmp_path):
    """Issue 35: the dead broker's leaderships move as soon as this broker controls, not one
    more Lease later (a controller's death cost two Leases)."""
    store = await led_by_2(tmp_path, time.monotonic() - 60)
    controller = Controller(store, node_id=1, campaign_interval_s=0.05, grace_s=30)
    controller.start()
    try:
        await until(lambda: store.image.topics["t"].assignment[0].leader == 3, timeout=3)
    finally:
        await controller.stop()


async def test_a_controller_whose_view_just_became_current_keeps_leaderships_for_the_grace(tmp_path):
    """After a start or an API-server outage a Lease that lapsed unseen is not a dead broker
    until the view has been current for one Lease duration."""
    store = await led_by_2(tmp_path, time.monotonic())
    controller = Controller(store, node_id=1, campaign_interval_s=0.05, grace_s=1.0)
    controller.start()
    try:
        await until(lambda: controller.active)
        await asyncio.sleep(0.4)
        assert store.image.topics["t"].assignment[0].leader == 2
        await until(lambda: store.image.topics["t"].assignment[0].leader == 3, timeout=5)
    finally:
        await controller.stop()
