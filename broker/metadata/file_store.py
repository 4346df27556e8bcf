"""Local-file backend of the metadata store (one broker, `make broker`): a snapshot plus a journal.

A write costs the size of the change, not of the cluster: each topic create, update or delete is
one line appended to `flotilla-metadata.journal` and fsync'd (writes that arrive while an fsync
runs share the next one: group commit), and only then published in the image. Now and then, when
the journal has grown as large as the snapshot, the snapshot `flotilla-metadata.json` is rewritten
with everything (temp file, fsync, rename: `durable.write_atomically`) and the journal emptied, so
compaction costs O(1) per write amortised. At start-up the snapshot is read and the journal
replayed over it; a last line cut short by a crash (or failing its checksum) is dropped and cut
off, as a torn batch is in a log segment. Replaying is idempotent (a line holds a topic's whole
record, or a delete by name), so a crash between the snapshot's rename and the journal's
truncation loses nothing and doubles nothing. A `flotilla-metadata.json` written before the
journal existed is a valid snapshot with an empty journal: a broker upgraded in place keeps its
topics. The format is documented in docs/architecture.md ("On disk").
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import uuid
from pathlib import Path

import crc32c

from broker.log.durable import STORAGE_IO, fsync_directory, write_atomically
from broker.metadata.store import (BrokerRegistration, Conflict, MetadataImage, MetadataStore, PartitionState,
                                   TopicExists, TopicRecord, UnknownTopic)

log = logging.getLogger(__name__)

FILE_NAME = "flotilla-metadata.json"  # the snapshot
JOURNAL_NAME = "flotilla-metadata.journal"  # changes since the snapshot, one line each
PRODUCER_ID_FILE = "producer-id-block"  # the end of the last block handed out
# Compact once the journal is this large and at least as large as the snapshot.
MIN_COMPACT_BYTES = 64 * 1024


def topic_to_json(t: TopicRecord) -> dict:
    return {"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
            "replication_factor": t.replication_factor, "configs": t.configs, "version": t.version,
            "assignment": None if t.assignment is None else [dataclasses.asdict(p) for p in t.assignment],
            **({} if t.requested_replicas is None else {"requested_replicas": [list(r) for r in t.requested_replicas]})}


def topic_from_json(t: dict) -> TopicRecord:
    a = t.get("assignment")
    asked = t.get("requested_replicas")
    return TopicRecord(name=t["name"], topic_id=uuid.UUID(t["id"]), partitions=t["partitions"],
                       replication_factor=t.get("replication_factor", 1),
                       configs=t.get("configs", {}), version=t.get("version", 0),
                       assignment=None if a is None else tuple(
                           PartitionState(p["leader"], p["leader_epoch"], tuple(p["replicas"]), tuple(p["isr"]),
                                          tuple(p.get("adding", ())), tuple(p.get("removing", ())))
                           for p in a),
                       requested_replicas=None if asked is None else tuple(tuple(r) for r in asked))


def journal_line(change: dict) -> bytes:
    """`<crc32c of the JSON, 8 hex digits> <JSON>\\n`: the checksum tells a torn line from a whole one."""
    body = json.dumps(change, separators=(",", ":")).encode()
    return b"%08x %s\n" % (crc32c.crc32c(body), body)


def parse_journal(data: bytes) -> tuple[list[dict], int]:
    """The whole lines of a journal and the length they span; the rest is a torn tail."""
    changes, good = [], 0
    while good < len(data):
        end = data.find(b"\n", good)
        if end < 0:
            break
        line = data[good:end]
        try:
            crc, body = line.split(b" ", 1)
            if int(crc, 16) != crc32c.crc32c(body):
                break
            change = json.loads(body)
        except ValueError:
            break
        changes.append(change)
        good = end + 1
    return changes, good


def apply_change(topics: dict[str, TopicRecord], change: dict) -> None:
    if change["op"] == "put":
        rec = topic_from_json(change["topic"])
        topics[rec.name] = rec
    elif change["op"] == "delete":
        topics.pop(change["name"], None)
    else:
        raise ValueError(f"unknown journal operation {change['op']!r}")


class FileMetadataStore(MetadataStore):
    def __init__(self, directory: Path, cluster_id: str) -> None:
        super().__init__()
        self.path = directory / FILE_NAME
        self.journal_path = directory / JOURNAL_NAME
        self.cluster_id = cluster_id
        topics: dict[str, TopicRecord] = {}
        self._snapshot_bytes = 0
        if self.path.exists():
            raw = self.path.read_bytes()
            self._snapshot_bytes = len(raw)
            for t in json.loads(raw).get("topics", []):
                rec = topic_from_json(t)
                topics[rec.name] = rec
        self._journal_bytes = self._replay(topics)
        # What the next write is checked against: the durable topics plus writes waiting for their fsync.
        self._topics = topics
        # Writes appended but not yet fsync'd: (line, futures told when durable, the change applied).
        self._queue: list[tuple[bytes, asyncio.Future, dict]] = []
        self._flusher: asyncio.Task | None = None
        self.fsyncs = 0  # journal fsyncs and snapshot writes (tests count them)
        self.bytes_written = 0
        self._brokers: dict[int, BrokerRegistration] = {}
        self._controller: int | None = None
        self.image = MetadataImage.build(cluster_id, {}, None, topics)

    # -- on disk -----------------------------------------------------------------------------
    def _replay(self, topics: dict[str, TopicRecord]) -> int:
        """Apply the journal to `topics`; cut off a torn tail. Returns the journal's length."""
        try:
            data = self.journal_path.read_bytes()
        except FileNotFoundError:
            return 0
        changes, good = parse_journal(data)
        for change in changes:
            apply_change(topics, change)
        if good < len(data):
            log.warning("%s: dropped %d bytes after the last whole change (a write cut short by a crash)",
                        self.journal_path, len(data) - good)
            with open(self.journal_path, "r+b") as f:
                f.truncate(good)
                f.flush()
                os.fsync(f.fileno())
        return good

    def _append(self, lines: list[bytes]) -> None:
        """Append and fsync (in STORAGE_IO); a failed write leaves the journal as it was."""
        data = b"".join(lines)
        fd = os.open(self.journal_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            size = os.fstat(fd).st_size
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                os.fsync(fd)
            except BaseException:
                os.ftruncate(fd, size)  # a torn line would be dropped at start-up anyway
                raise
        finally:
            os.close(fd)
        if size == 0:
            fsync_directory(self.path.parent)  # the journal's directory entry is new
        self.fsyncs += 1
        self.bytes_written += len(data)

    def _compact(self, topics: dict[str, TopicRecord]) -> None:
        """Write every topic to the snapshot, then empty the journal (in STORAGE_IO)."""
        doc = {"version": 1, "cluster_id": self.cluster_id,
               "topics": [topic_to_json(t) for t in sorted(topics.values(), key=lambda t: t.name)]}
        data = json.dumps(doc, separators=(",", ":")).encode()  # the C encoder: indent= is pure Python
        write_atomically(self.path, data)
        with open(self.journal_path, "r+b") as f:
            f.truncate(0)
            f.flush()
            os.fsync(f.fileno())
        self.fsyncs += 2
        self.bytes_written += len(data)
        self._snapshot_bytes = len(data)
        self._journal_bytes = 0

    # -- writes: checked against self._topics, durable before they are published ------------
    async def _write(self, name: str, record: TopicRecord | None) -> None:
        """Journal `record` as topic `name`'s whole state (None: deleted); return once durable."""
        change = {"op": "delete", "name": name} if record is None else {"op": "put", "topic": topic_to_json(record)}
        if record is None:
            self._topics.pop(name, None)
        else:
            self._topics[name] = record
        fut = asyncio.get_running_loop().create_future()
        self._queue.append((journal_line(change), fut, name, record))
        if self._flusher is None or self._flusher.done():
            self._flusher = asyncio.create_task(self._flush_loop(), name="metadata-journal")
        await asyncio.shield(fut)

    async def _flush_loop(self) -> None:
        """Group commit: every write queued while an fsync ran goes out in the next one."""
        loop = asyncio.get_running_loop()
        while self._queue:
            batch, self._queue = self._queue, []
            lines = [line for line, _, _, _ in batch]
            try:
                await loop.run_in_executor(STORAGE_IO, self._append, lines)
            except Exception as e:
                # Not durable: what later writes are checked against forgets the batch.
                self._topics = self.image.topics.copy()
                for _, _, name, record in self._queue:
                    self._topics[name] = record
                self._topics = {n: r for n, r in self._topics.items() if r is not None}
                for _, fut, _, _ in batch:
                    if not fut.done():
                        fut.set_exception(e)
                continue
            self._journal_bytes += sum(map(len, lines))
            net = {name: record for _, _, name, record in batch}  # the last write of each name wins
            self._publish(self.image.with_topics(puts=[r for r in net.values() if r is not None],
                                                 deletes=[n for n, r in net.items() if r is None]))
            for _, fut, _, _ in batch:
                if not fut.done():
                    fut.set_result(None)
            if self._journal_bytes >= max(MIN_COMPACT_BYTES, self._snapshot_bytes):
                try:
                    await loop.run_in_executor(STORAGE_IO, self._compact, self.image.topics.copy())
                except Exception:  # the journal still holds every change: nothing is lost
                    log.exception("compacting %s failed; the journal keeps growing until it succeeds", self.path)

    async def close(self) -> None:
        """Finish queued writes; a clean stop leaves a compacted snapshot and an empty journal."""
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)
        if self._journal_bytes:
            try:
                await asyncio.get_running_loop().run_in_executor(STORAGE_IO, self._compact, self.image.topics.copy())
            except OSError as e:
                log.warning("compacting %s at shutdown failed (the journal keeps every change): %s", self.path, e)

    async def create_topic(self, rec: TopicRecord) -> TopicRecord:
        if rec.name in self._topics:
            raise TopicExists(rec.name)
        stored = dataclasses.replace(rec, version=1)
        await self._write(rec.name, stored)
        return stored

    async def update_topic(self, rec: TopicRecord) -> TopicRecord:
        current = self._topics.get(rec.name)
        if current is None:
            raise UnknownTopic(rec.name)
        if current.version != rec.version:
            raise Conflict(f"topic {rec.name} is at version {current.version}, not {rec.version}")
        stored = dataclasses.replace(rec, version=rec.version + 1)
        await self._write(rec.name, stored)
        return stored

    async def delete_topic(self, name: str) -> TopicRecord:
        current = self._topics.get(name)
        if current is None:
            raise UnknownTopic(name)
        await self._write(name, None)
        return current

    # -- brokers and the controller: in memory (one broker) ---------------------------------
    async def register_broker(self, reg: BrokerRegistration) -> None:
        self._brokers[reg.node_id] = reg
        self._publish(MetadataImage.build(self.cluster_id, self._brokers, self._controller, self.image.topics))

    async def campaign(self, node_id: int) -> bool:
        if self._controller != node_id:
            self._controller = node_id
            self._publish(MetadataImage.build(self.cluster_id, self._brokers, self._controller, self.image.topics))
        return True

    def is_controller(self, node_id: int) -> bool:
        return self._controller == node_id

    async def allocate_producer_ids(self, block_size: int) -> int:
        """One broker owns this file, so the compare-and-set is a durable write of the new end."""
        path = self.path.with_name(PRODUCER_ID_FILE)
        try:
            start = int(path.read_text().strip())
        except (FileNotFoundError, ValueError):
            start = 0
        tmp = path.with_name(path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(f"{start + block_size}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return start
