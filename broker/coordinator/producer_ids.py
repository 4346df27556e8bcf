"""Hands out producer ids for InitProducerId, unique across the whole cluster.

As in Kafka since KIP-730, each broker takes blocks of ids from the cluster metadata (a
compare-and-set there, so two brokers never get the same block) and hands them out one by
one. A block is reserved before any id of it is used, so a restart skips the rest of its
block and never hands out an id twice.
"""

from __future__ import annotations

import asyncio

from broker.metadata.store import MetadataStore

BLOCK_SIZE = 1000


class ProducerIdManager:
    def __init__(self, store: MetadataStore, block_size: int = BLOCK_SIZE) -> None:
        self.store = store
        self.block_size = block_size
        self._next = self._block_end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        """The next id of this broker's block; StoreUnavailable when a new block cannot be had."""
        async with self._lock:
            if self._next >= self._block_end:
                start = await self.store.allocate_producer_ids(self.block_size)
                self._next, self._block_end = start, start + self.block_size
            pid = self._next
            self._next += 1
            return pid
