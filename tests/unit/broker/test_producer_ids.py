import asyncio

from broker.coordinator.producer_ids import BLOCK_SIZE, ProducerIdManager
from broker.metadata.file_store import FileMetadataStore


async def test_ids_are_unique_across_restarts(tmp_path):
    m = ProducerIdManager(FileMetadataStore(tmp_path, "c"))
    first = [await m.next_id() for _ in range(3)]
    assert first == [0, 1, 2]
    again = ProducerIdManager(FileMetadataStore(tmp_path, "c"))  # a crash: the rest of the block is skipped
    assert await again.next_id() == BLOCK_SIZE


async def test_concurrent_requests_share_one_block(tmp_path):
    m = ProducerIdManager(FileMetadataStore(tmp_path, "c"), block_size=10)
    ids = await asyncio.gather(*(m.next_id() for _ in range(25)))
    assert sorted(ids) == list(range(25))  # three blocks taken, no id twice
