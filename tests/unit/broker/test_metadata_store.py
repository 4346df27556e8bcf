"""Contract tests of the metadata store. Every backend must pass them; the Kubernetes backend
will be added to BACKENDS when it lands."""

import pytest

from broker.metadata.file_store import FileMetadataStore
from broker.metadata.store import Conflict, TopicExists, UnknownTopic, new_topic


def file_backend(tmp_path):
    return FileMetadataStore(tmp_path, "cluster-a")


BACKENDS = [file_backend]


@pytest.fixture(params=BACKENDS, ids=lambda f: f.__name__)
def store(request, tmp_path):
    return request.param(tmp_path)


def test_create_if_absent(store):
    t = store.create_topic(new_topic("orders", 3))
    assert t.version == 1 and store.topic("orders").partitions == 3
    with pytest.raises(TopicExists):
        store.create_topic(new_topic("orders", 1))
    assert store.topic_by_id(t.topic_id).name == "orders"


def test_compare_and_set(store):
    t = store.create_topic(new_topic("orders", 3))
    import dataclasses
    t2 = store.update_topic(dataclasses.replace(t, partitions=6))
    assert t2.version == 2 and store.topic("orders").partitions == 6
    with pytest.raises(Conflict):
        store.update_topic(dataclasses.replace(t, partitions=9))  # stale version
    with pytest.raises(UnknownTopic):
        store.update_topic(dataclasses.replace(t, name="nope"))


def test_delete(store):
    store.create_topic(new_topic("a", 1))
    store.delete_topic("a")
    assert store.topic("a") is None
    with pytest.raises(UnknownTopic):
        store.delete_topic("a")


def test_file_backend_survives_reopen(tmp_path):
    s = FileMetadataStore(tmp_path, "c")
    t = s.create_topic(new_topic("kept", 2, configs={"retention.ms": "1000"}))
    again = FileMetadataStore(tmp_path, "c")
    assert again.topic("kept") == t
