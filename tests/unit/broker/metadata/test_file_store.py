"""The local-file backend (one broker, `make broker`): the shared contract, and what only it does."""

import dataclasses

import pytest

from broker.metadata.file_store import FileMetadataStore
from broker.metadata.store import PartitionState, new_topic
from tests.support.metadata_contract import MetadataStoreContract


class TestFileStore(MetadataStoreContract):
    @pytest.fixture
    async def store(self, tmp_path):
        s = FileMetadataStore(tmp_path, "cluster-a")
        await s.start()
        yield s
        await s.close()


async def test_survives_reopen(tmp_path):
    s = FileMetadataStore(tmp_path, "c")
    t = await s.create_topic(new_topic("kept", 2, configs={"retention.ms": "1000"}))
    t = await s.update_topic(dataclasses.replace(t, assignment=(PartitionState(1, 3, (1,), (1,)),) * 2))
    again = FileMetadataStore(tmp_path, "c")
    assert again.image.topics["kept"] == t
    assert again.image.topic_by_id(t.topic_id) == t


async def test_no_partition_limit_of_its_own(tmp_path):
    assert FileMetadataStore(tmp_path, "c").max_partitions(3) is None
