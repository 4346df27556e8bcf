"""CreateTopics and CreatePartitions refuse a topic larger than the metadata store can hold in one
record (the Kubernetes backend's etcd bound), with INVALID_PARTITIONS, before writing anything."""

import pytest
from kio.schema.errors import ErrorCode

from broker.config import parse_config
from broker.metadata.file_store import FileMetadataStore
from broker.metadata.store import new_topic
from broker.admin.topics import TopicError, TopicManager


class BoundedStore(FileMetadataStore):
    """The file backend with a Kubernetes-like bound of 4 partitions per replica."""

    def max_partitions(self, replication_factor):
        return 4 // replication_factor


@pytest.fixture
def topics(tmp_path):
    store = BoundedStore(tmp_path, "c")
    return TopicManager(parse_config({}), store, replicas=None)


def test_create_beyond_the_stores_bound_is_invalid_partitions(topics):
    assert topics.check_create("ok", 4, 1, {}) == (4, 1)
    with pytest.raises(TopicError) as e:
        topics.check_create("big", 5, 1, {})
    assert e.value.code == ErrorCode.invalid_partitions and "exceed the 4 one topic can have" in str(e.value)
    assert "big" not in topics.store.image.topics


async def test_growing_beyond_the_stores_bound_is_invalid_partitions(topics):
    await topics.store.create_topic(new_topic("t", 2))
    with pytest.raises(TopicError) as e:
        await topics.add_partitions("t", 5, validate_only=True)
    assert e.value.code == ErrorCode.invalid_partitions
    assert topics.store.image.topics["t"].partitions == 2
