"""Persistence of groups and committed offsets in the internal topic `__consumer_offsets`.

As in Kafka, the topic has `offsets.topic.num.partitions` partitions of
`offsets.topic.segment.bytes` segments; a group lives in partition abs(hashCode(group id)) % n.
Writes are record batches with no producer id whose records carry the keys and values of
`codec`; loading a partition replays it, the last value of a key winning and a null value
(tombstone) deleting it. The topic is `cleanup.policy=compact`: the log cleaner
(broker/log/cleaner.py) keeps the last record of each key and drops tombstones after
delete.retention.ms, so replay reads about one record per live key.
"""

from __future__ import annotations

import datetime
import io
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from broker.coordinator.group import codec
from broker.log.log import LogError, ProducerFenced, StorageError
from broker.protocol import records as batch_records

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.store import MetadataStore
    from broker.replica.partition import Partition
    from broker.replica.partition_writer import PartitionWriter
    from broker.admin.topics import TopicManager

log = logging.getLogger(__name__)

TOPIC = "__consumer_offsets"
READ_CHUNK = 8 * 1024 * 1024


class StoreError(Exception):
    """An append to `__consumer_offsets` failed; `code` is what the client is told."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class LoadedRecord:
    key: codec.OffsetKey | codec.GroupKey
    value: bytes | None
    producer_id: int = -1  # a TxnOffsetCommit's producer (pending until its marker), else -1


@dataclass(frozen=True, slots=True)
class LoadedMarker:
    """A transaction marker: the producer's pending TxnOffsetCommits apply (commit) or go."""

    producer_id: int
    commit: bool


def build_batch(entries: list[tuple[bytes, bytes | None]], now: datetime.datetime | None = None,
                producer: tuple[int, int] | None = None) -> bytes:
    """One uncompressed v2 batch holding `(key, value)` records: without producer id, or
    transactional for `producer` = (id, epoch) (a TxnOffsetCommit, sequence 0 as Kafka writes it)."""
    ts = now or datetime.datetime.now(datetime.UTC)
    pid, epoch = producer or (-1, -1)
    batch = NewRecordBatch(
        producer_id=i64(pid), producer_epoch=i16(epoch), base_sequence=i32(0 if producer else -1),
        attributes=i16(batch_records.ATTR_TRANSACTIONAL if producer else 0),
        records=tuple(Record(attributes=i8(0), timestamp=ts, offset=i64(i), key=k, value=v, headers=())
                      for i, (k, v) in enumerate(entries)),
    )
    out = io.BytesIO()
    write_new_batch(out, batch)
    return out.getvalue()


def iter_batch_records(buf: bytes) -> Iterator[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record of the uncompressed, non-control batches in `buf`."""
    for h, key, value in iter_records_with_batch(buf):
        if not h.is_control:
            yield key, value


def iter_records_with_batch(buf: bytes) -> Iterator[tuple[batch_records.BatchHeader, bytes | None, bytes | None]]:
    """(batch header, key, value) of every record of the uncompressed batches in `buf`, control
    batches (transaction markers) included."""
    for pos, h in batch_records.iter_headers(buf):
        if h.attributes & batch_records.ATTR_COMPRESSION_MASK:
            log.warning("%s: skipping a compressed batch at offset %d", TOPIC, h.base_offset)
            continue
        batch, _ = read_batch(buf, pos)
        for rec in batch.records:
            yield h, rec.key, rec.value


def control_commits(key: bytes | None) -> bool | None:
    """A control record's key (version int16, type int16): True for COMMIT (1), False for ABORT
    (0), None for anything else."""
    if key is None or len(key) < 4:
        return None
    kind = int.from_bytes(key[2:4], "big", signed=True)
    return {0: False, 1: True}.get(kind)


@dataclass(frozen=True)
class Appended:
    """A batch the coordinator wrote: its partition (as led then), the leader epoch, and the
    offset the high watermark must reach for the in-sync replicas to hold it."""

    part: "Partition"
    leader_epoch: int
    end_offset: int


class OffsetsLog:
    def __init__(self, *, config: "BrokerConfig", node_id: int, store: "MetadataStore", topics: "TopicManager",
                 writer: "PartitionWriter") -> None:
        self.config, self.node_id, self.store, self.topics, self.writer = config, node_id, store, topics, writer
        self.num_partitions: int = config["offsets.topic.num.partitions"]

    async def ensure_topic(self) -> None:
        """Create the topic (the controller assigns its partitions across the live brokers)."""
        await self.topics.ensure(TOPIC, self.num_partitions, replication_factor=self.config[
            "offsets.topic.replication.factor"], configs={
            "cleanup.policy": "compact", "segment.bytes": str(self.config["offsets.topic.segment.bytes"])})
        self.refresh_partition_count()

    def refresh_partition_count(self) -> None:
        # An existing topic keeps its partition count, whatever the config says now.
        record = self.store.image.topics.get(TOPIC)
        if record is not None:
            self.num_partitions = record.partitions

    def all_led(self, image) -> bool:
        """Every partition of the topic has a leader and the ones led here are loaded."""
        record = image.topics.get(TOPIC)
        if record is None or record.assignment is None or len(record.assignment) < record.partitions:
            return False
        me = self.node_id
        return all(s.leader >= 0 and (s.leader != me or self.writer.leader(TOPIC, i) is not None)
                   for i, s in enumerate(record.assignment))

    def partition_for(self, group_id: str) -> int:
        return codec.partition_for(group_id, self.num_partitions)

    def _partition(self, index: int) -> "Partition":
        part = self.writer.leader(TOPIC, index)
        if part is None:
            raise StoreError(ErrorCode.not_coordinator, f"{TOPIC}-{index} is not led by this broker")
        return part

    # -- writing -----------------------------------------------------------------------------
    def append(self, group_id: str, entries: list[tuple[bytes, bytes | None]],
               producer: tuple[int, int] | None = None) -> "Appended | None":
        """Write records for one group (same partition) as one batch; raises StoreError. Returns
        where the batch ends, for a caller that waits for the in-sync replicas to hold it.
        With `producer` the batch is transactional (TxnOffsetCommit)."""
        if not entries:
            return None
        part = self._partition(self.partition_for(group_id))
        self._append(part, entries, producer)
        return Appended(part, part.leader_epoch, part.log.log_end_offset)

    def _append(self, part: "Partition", entries: list[tuple[bytes, bytes | None]],
                producer: tuple[int, int] | None = None) -> None:
        payload = build_batch(entries, producer=producer)
        try:
            headers = batch_records.validate_batches(payload, part.log.config.max_message_bytes)
        except batch_records.RecordTooLargeError as e:
            raise StoreError(ErrorCode.invalid_commit_offset_size, str(e)) from None
        try:
            self.writer.append(part, payload, headers, from_coordinator=True)
        except ProducerFenced as e:  # a TxnOffsetCommit from an epoch its markers have fenced
            raise StoreError(ErrorCode.invalid_producer_epoch, str(e)) from None
        except StorageError as e:
            raise StoreError(ErrorCode.coordinator_not_available, str(e)) from None
        except LogError as e:
            raise StoreError(ErrorCode.unknown_server_error, str(e)) from None

    # -- reading -----------------------------------------------------------------------------
    def replay_partition(self, index: int) -> Iterator[LoadedRecord | LoadedMarker]:
        """Every record of one partition, in offset order (a coordinator shard being loaded)."""
        part = self._partition(index)
        yield from self._replay_partition(part)

    def _replay_partition(self, part: "Partition") -> Iterator[LoadedRecord | LoadedMarker]:
        offset = part.log.log_start_offset
        end = part.log.log_end_offset  # as Kafka: a new leader loads all it has, committed or not yet
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
            for h, key, value in iter_records_with_batch(buf):
                if h.is_control:
                    commit = control_commits(key)
                    if commit is not None and h.has_producer_id:
                        yield LoadedMarker(h.producer_id, commit)
                    continue
                if key is None:
                    continue
                try:
                    decoded = codec.decode_key(key)
                except codec.CodecError as e:
                    log.warning("%s-%d: skipping a record with an unreadable key: %s", TOPIC, part.index, e)
                    continue
                yield LoadedRecord(decoded, value, h.producer_id if h.is_transactional else -1)
            offset = last.last_offset + 1
