"""Persistence of transaction metadata in the internal topic `__transaction_state`.

As in Kafka: `transaction.state.log.num.partitions` partitions (50), compacted, segments of
`transaction.state.log.segment.bytes`; a transactional id lives in partition
abs(hashCode(id)) % n, keyed by its id (codec.py), the last value winning and a tombstone
forgetting the id. Writes go through the partition's leader like the group coordinator's
(`offsets_log`'s batch helpers), and the coordinator waits for the in-sync replicas.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Iterator

from kio.schema.errors import ErrorCode

from broker.coordinator.group.offsets_log import Appended, StoreError, build_batch, iter_batch_records
from broker.coordinator.transaction import codec
from broker.coordinator.transaction.state import Transit
from broker.log.log import LogError, StorageError
from broker.protocol import records as batch_records

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.store import MetadataStore
    from broker.replica.partition import Partition
    from broker.replica.partition_writer import PartitionWriter
    from broker.admin.topics import TopicManager

log = logging.getLogger(__name__)

TOPIC = "__transaction_state"
READ_CHUNK = 8 * 1024 * 1024


class TransactionLog:
    def __init__(self, config: "BrokerConfig", store: "MetadataStore", topics: "TopicManager",
                 writer: "PartitionWriter") -> None:
        self.config, self.store, self.topics, self.writer = config, store, topics, writer
        self.num_partitions: int = config["transaction.state.log.num.partitions"]

    async def ensure_topic(self) -> None:
        await self.topics.ensure(TOPIC, self.num_partitions,
                                 replication_factor=self.config["transaction.state.log.replication.factor"],
                                 configs={"cleanup.policy": "compact",
                                          "min.insync.replicas": str(self.config["transaction.state.log.min.isr"]),
                                          "segment.bytes": str(self.config["transaction.state.log.segment.bytes"])})
        self.refresh_partition_count()

    def refresh_partition_count(self) -> None:
        record = self.store.image.topics.get(TOPIC)
        if record is not None:
            self.num_partitions = record.partitions

    def partition_for(self, transactional_id: str) -> int:
        return codec.partition_for(transactional_id, self.num_partitions)

    def leader_of(self, index: int) -> "Partition | None":
        return self.writer.leader(TOPIC, index)

    def append(self, part: "Partition", transactional_id: str, transit: Transit | None) -> Appended:
        """One record (a tombstone when `transit` is None); raises StoreError with Kafka's mapping."""
        value = None if transit is None else codec.encode_value(transit)
        payload = build_batch([(codec.encode_key(transactional_id), value)])
        try:
            headers = batch_records.validate_batches(payload, part.log.config.max_message_bytes)
            self.writer.append(part, payload, headers)
        except batch_records.RecordTooLargeError as e:
            raise StoreError(ErrorCode.unknown_server_error, str(e)) from None
        except StorageError as e:
            raise StoreError(ErrorCode.not_coordinator, str(e)) from None
        except LogError as e:
            raise StoreError(ErrorCode.unknown_server_error, str(e)) from None
        return Appended(part, part.leader_epoch, part.log.log_end_offset)

    def replay(self, part: "Partition") -> Iterator[tuple[str, Transit | None]]:
        """(transactional id, value or None for a tombstone) of every record, in offset order."""
        offset, end = part.log.log_start_offset, part.log.log_end_offset
        while offset < end:
            region = part.log.read(offset, READ_CHUNK, upper_bound=end, min_one=True)
            if region is None:
                break
            buf = os.pread(region.fd, region.length, region.position)
            last = None
            for _, h in batch_records.iter_headers(buf):
                last = h
            if last is None:
                break
            for key, value in iter_batch_records(buf):
                if key is None:
                    continue
                try:
                    yield codec.decode_key(key), None if value is None else codec.decode_value(value)
                except codec.CodecError as e:
                    log.warning("%s-%d: skipping an unreadable record: %s", TOPIC, part.index, e)
            offset = last.last_offset + 1
