"""Contract tests of the metadata store. Every backend must pass them; the Kubernetes backend
will be added to BACKENDS when it lands."""

import dataclasses

import pytest

from broker.metadata.file_store import FileMetadataStore
from broker.metadata.store import Conflict, PartitionState, TopicExists, UnknownTopic, new_topic


def file_backend(tmp_path):
    return FileMetadataStore(tmp_path, "cluster-a")


BACKENDS = [file_backend]


@pytest.fixture(params=BACKENDS, ids=lambda f: f.__name__)
async def store(request, tmp_path):
    s = request.param(tmp_path)
    await s.start()
    yield s
    await s.close()


async def test_create_if_absent(store):
    t = await store.create_topic(new_topic("orders", 3))
    assert t.version and store.image.topics["orders"].partitions == 3
    assert store.image.topics["orders"].assignment is None  # the controller assigns
    with pytest.raises(TopicExists):
        await store.create_topic(new_topic("orders", 1))
    assert store.image.topic_by_id(t.topic_id).name == "orders"


async def test_compare_and_set(store):
    t = await store.create_topic(new_topic("orders", 3))
    t2 = await store.update_topic(dataclasses.replace(t, partitions=6))
    assert t2.version != t.version and store.image.topics["orders"].partitions == 6
    with pytest.raises(Conflict):
        await store.update_topic(dataclasses.replace(t, partitions=9))  # stale version
    with pytest.raises(UnknownTopic):
        await store.update_topic(dataclasses.replace(t, name="nope"))


async def test_delete(store):
    await store.create_topic(new_topic("a", 1))
    await store.delete_topic("a")
    assert "a" not in store.image.topics
    with pytest.raises(UnknownTopic):
        await store.delete_topic("a")


async def test_subscribers_see_every_change_with_the_old_and_new_image(store):
    seen = []
    store.subscribe(lambda old, new: seen.append(("x" in old.topics, "x" in new.topics)))
    await store.create_topic(new_topic("x", 1))
    await store.delete_topic("x")
    assert (False, True) in seen and (True, False) in seen


async def test_file_backend_survives_reopen(tmp_path):
    s = FileMetadataStore(tmp_path, "c")
    t = await s.create_topic(new_topic("kept", 2, configs={"retention.ms": "1000"}))
    t = await s.update_topic(dataclasses.replace(t, assignment=(PartitionState(1, 3, (1,), (1,)),) * 2))
    again = FileMetadataStore(tmp_path, "c")
    assert again.image.topics["kept"] == t
