"""The metadata store's contract, written once; every backend's tests subclass it.

    class TestFileStore(MetadataStoreContract):
        @pytest.fixture
        async def store(self, tmp_path): ...   # a started store, closed afterwards

What a store must do whatever it is backed by (FLEET-INTERFACE.md): create-if-absent topics that
wait for the controller's assignment, compare-and-set updates on an opaque version, deletes, an
immutable image indexed by name and by topic id, subscribers told (old, new) after every change,
broker registration, a controller election its own node wins when alone, and producer-id blocks
(KIP-730) taken by compare-and-set so that no two overlap.
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from broker.metadata.store import (NO_TOPIC_ID, BrokerRegistration, Conflict, Endpoint, PartitionState,
                                   TopicExists, UnknownTopic, new_topic)


def registration(node_id: int = 1, port: int = 9092, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(node_id=node_id, incarnation=str(uuid.uuid4()),
                              endpoints=(Endpoint("PLAINTEXT", "127.0.0.1", port, "PLAINTEXT"),), rack=rack)


class MetadataStoreContract:
    async def test_create_if_absent_leaves_the_assignment_to_the_controller(self, store):
        t = await store.create_topic(new_topic("orders", 3, configs={"retention.ms": "1000"}))
        seen = store.image.topics["orders"]
        assert seen == t
        assert (seen.partitions, seen.replication_factor, seen.configs) == (3, 1, {"retention.ms": "1000"})
        assert seen.assignment is None
        assert seen.topic_id != NO_TOPIC_ID
        with pytest.raises(TopicExists):
            await store.create_topic(new_topic("orders", 1))
        assert store.image.topics["orders"].partitions == 3

    async def test_image_is_indexed_by_name_and_by_id(self, store):
        made = [await store.create_topic(new_topic(f"t{i}", 1)) for i in range(5)]
        image = store.image
        for t in made:
            assert image.topic_by_id(t.topic_id).name == t.name
        assert image.topic_by_id(uuid.uuid4()) is None
        # Reading does not copy: the same mapping object until the next change, and read-only.
        assert store.image.topics is image.topics
        with pytest.raises(TypeError):
            image.topics["x"] = made[0]  # type: ignore[index]

    async def test_compare_and_set_on_the_version(self, store):
        t = await store.create_topic(new_topic("orders", 3))
        assignment = tuple(PartitionState(1, 0, (1,), (1,)) for _ in range(3))
        t2 = await store.update_topic(dataclasses.replace(t, assignment=assignment))
        assert t2.version != t.version
        assert store.image.topics["orders"].assignment == assignment
        with pytest.raises(Conflict):
            await store.update_topic(dataclasses.replace(t, partitions=6))  # stale version
        assert store.image.topics["orders"].partitions == 3
        t3 = await store.update_topic(dataclasses.replace(t2, partitions=6))
        assert t3.partitions == 6 and t3.assignment == assignment, t3
        assert store.image.topics["orders"] == t3
        with pytest.raises(UnknownTopic):
            await store.update_topic(dataclasses.replace(t3, name="nope"))

    async def test_topic_id_is_kept_by_updates(self, store):
        t = await store.create_topic(new_topic("keep-id", 1))
        t2 = await store.update_topic(dataclasses.replace(t, configs={"cleanup.policy": "delete"}))
        assert t2.topic_id == t.topic_id and store.image.topic_by_id(t.topic_id).configs == {"cleanup.policy": "delete"}

    async def test_delete(self, store):
        t = await store.create_topic(new_topic("a", 1))
        gone = await store.delete_topic("a")
        assert gone.topic_id == t.topic_id
        assert "a" not in store.image.topics and store.image.topic_by_id(t.topic_id) is None
        with pytest.raises(UnknownTopic):
            await store.delete_topic("a")
        again = await store.create_topic(new_topic("a", 2))  # the name is free again
        assert store.image.topics["a"].partitions == 2 and again.topic_id != t.topic_id

    async def test_kafka_topic_names_with_dots_underscores_and_capitals(self, store):
        names = ["__consumer_offsets", "Orders.EU_west", "orders.eu.west", "orders_eu_west"]
        for n in names:
            await store.create_topic(new_topic(n, 1))
        assert set(names) <= set(store.image.topics)
        assert {store.image.topics[n].name for n in names} == set(names)

    async def test_subscribers_see_every_change_with_the_old_and_new_image(self, store):
        seen = []
        store.subscribe(lambda old, new: seen.append(("x" in old.topics, "x" in new.topics)))
        await store.create_topic(new_topic("x", 1))
        await store.delete_topic("x")
        assert (False, True) in seen and (True, False) in seen

    async def test_register_broker_and_win_the_election_alone(self, store):
        reg = registration(1, 9092, rack="r1")
        await store.register_broker(reg)
        assert store.image.brokers[1] == reg
        assert await store.campaign(1)
        assert store.is_controller(1) and not store.is_controller(2)
        assert store.image.controller_id == 1
        assert await store.campaign(1)  # renewing keeps it
        assert store.is_controller(1)

    async def test_producer_id_blocks_never_overlap(self, store):
        import asyncio

        first = await store.allocate_producer_ids(1000)
        starts = await asyncio.gather(*(store.allocate_producer_ids(1000) for _ in range(5)))
        blocks = sorted([first, *starts])
        assert blocks[0] == first >= 0
        assert all(b - a >= 1000 for a, b in zip(blocks, blocks[1:])), blocks

    async def test_image_has_the_cluster_id(self, store):
        assert store.image.cluster_id
        assert isinstance(store.lease_duration_s, float)
