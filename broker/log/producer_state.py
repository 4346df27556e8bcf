"""Idempotent-producer state of one partition (KIP-98's sequence numbers).

For every producer id the partition remembers its epoch and the last five batches it appended
(first/last sequence and offsets). A retried batch that matches one of them is a duplicate and
gets its original offset back instead of being written twice; a gap in sequences is refused.
The state is snapshotted to `<offset>.snapshot` files and rebuilt from batch headers on start.

Transactions: the first offset of each producer's ongoing transaction (its first transactional
batch since its last COMMIT/ABORT marker) is kept, in the entry and in `ongoing`, and written in
snapshots, so the last stable offset (broker/log/stable_offset.py) survives a restart; a marker
ends it (`complete_txn`) and is checked against the producer's epoch and the coordinator's epoch.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import crc32c

from broker.log.durable import write_atomically
from broker.protocol.records import BatchHeader

MAX_CACHED_BATCHES = 5  # Kafka's client keeps at most 5 in-flight requests per connection
NO_EPOCH = -1


@dataclass(slots=True)
class CachedBatch:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque[CachedBatch] = field(default_factory=lambda: deque(maxlen=MAX_CACHED_BATCHES))
    last_seen_ms: int = 0
    txn_first_offset: int = -1  # first offset of the ongoing transaction, -1 if none
    coordinator_epoch: int = -1  # of the last marker written for this producer

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1


class SequenceCheck:
    """Outcome of checking one batch against the producer state."""

    OK = "ok"
    DUPLICATE = "duplicate"
    OUT_OF_ORDER = "out_of_order"
    FENCED = "fenced"
    COORDINATOR_FENCED = "coordinator_fenced"


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended: its producer, first offset, the marker's offset, and how."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


@dataclass(frozen=True, slots=True)
class CheckResult:
    outcome: str
    duplicate: CachedBatch | None = None
    message: str = ""


def _next_seq(seq: int) -> int:
    return 0 if seq == 0x7FFFFFFF else seq + 1


class ProducerStateManager:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its ongoing transaction

    def check(self, h: BatchHeader) -> CheckResult:
        if not h.has_producer_id:
            return CheckResult(SequenceCheck.OK)
        entry = self.producers.get(h.producer_id)
        if entry is None or entry.epoch == NO_EPOCH:
            # Unknown producer (new, or its state expired): accept from any sequence.
            return CheckResult(SequenceCheck.OK)
        if h.producer_epoch < entry.epoch:
            return CheckResult(SequenceCheck.FENCED, message=(
                f"producer {h.producer_id} epoch {h.producer_epoch} is older than {entry.epoch}"))
        for cached in entry.batches:
            if cached.first_seq == h.base_sequence and cached.last_seq == h.last_sequence and h.producer_epoch == entry.epoch:
                return CheckResult(SequenceCheck.DUPLICATE, duplicate=cached)
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                return CheckResult(SequenceCheck.OUT_OF_ORDER, message=(
                    f"producer {h.producer_id} new epoch {h.producer_epoch} must start at sequence 0, "
                    f"got {h.base_sequence}"))
            return CheckResult(SequenceCheck.OK)
        if h.base_sequence != _next_seq(entry.last_seq):
            return CheckResult(SequenceCheck.OUT_OF_ORDER, message=(
                f"producer {h.producer_id} expected sequence {_next_seq(entry.last_seq)}, got {h.base_sequence}"))
        return CheckResult(SequenceCheck.OK)

    def check_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int) -> CheckResult:
        """May a COMMIT/ABORT marker of this producer epoch, from this coordinator epoch, be written?
        As Kafka's ProducerStateManager: an older producer epoch is fenced (INVALID_PRODUCER_EPOCH),
        and so is an older coordinator epoch (TRANSACTION_COORDINATOR_FENCED)."""
        entry = self.producers.get(producer_id)
        if entry is None:
            return CheckResult(SequenceCheck.OK)
        if producer_epoch < entry.epoch:
            return CheckResult(SequenceCheck.FENCED, message=(
                f"marker of producer {producer_id} epoch {producer_epoch} is older than {entry.epoch}"))
        if coordinator_epoch < entry.coordinator_epoch:
            return CheckResult(SequenceCheck.COORDINATOR_FENCED, message=(
                f"marker of producer {producer_id} from coordinator epoch {coordinator_epoch}, older than "
                f"{entry.coordinator_epoch}"))
        return CheckResult(SequenceCheck.OK)

    def complete_txn(self, h: BatchHeader, aborted: bool, coordinator_epoch: int) -> CompletedTxn:
        """A marker batch `h` was appended: the producer's ongoing transaction (if any; else one
        holding only the marker, as Kafka) ends at it."""
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerEntry(h.producer_id)
        if h.producer_epoch != entry.epoch:
            entry.epoch = h.producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = coordinator_epoch
        entry.last_seen_ms = h.max_timestamp
        first = self.ongoing.pop(h.producer_id, h.base_offset)
        entry.txn_first_offset = -1
        return CompletedTxn(h.producer_id, first, h.base_offset, aborted)

    def record(self, h: BatchHeader) -> None:
        """Remember an appended data batch (called in log order, also while recovering); markers
        go to complete_txn."""
        if not h.has_producer_id:
            return
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerEntry(h.producer_id)
        if h.producer_epoch != entry.epoch:
            entry.epoch = h.producer_epoch
            entry.batches.clear()
        if h.is_transactional and entry.txn_first_offset < 0:
            entry.txn_first_offset = h.base_offset
            self.ongoing[h.producer_id] = h.base_offset
        entry.batches.append(CachedBatch(h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp))
        # Kafka ages a producer by its newest batch's timestamp, not by the broker's clock:
        # replaying the log on start gives every producer the age it had.
        entry.last_seen_ms = h.max_timestamp

    def bump_epoch(self, producer_id: int, epoch: int) -> None:
        """InitProducerId handed out a new epoch: older epochs are fenced from now on."""
        entry = self.producers.get(producer_id)
        if entry is not None and epoch > entry.epoch:
            entry.epoch = epoch
            entry.batches.clear()

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers whose newest batch is `expiration_ms` old or older (Kafka's
        removeExpiredProducers, run every producer.id.expiration.check.interval.ms), so that state
        and snapshots hold only producers still writing. A producer that comes back later is
        unknown and may start from any sequence, as in Kafka. Returns how many were removed."""
        expired = [pid for pid, e in self.producers.items()
                   if now_ms - e.last_seen_ms >= expiration_ms and e.txn_first_offset < 0]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def truncate_after(self, offset: int) -> None:
        """Forget batches at or beyond `offset` (log truncation)."""
        for pid, entry in list(self.producers.items()):
            kept = [b for b in entry.batches if b.last_offset < offset]
            entry.batches.clear()
            entry.batches.extend(kept)
            if entry.txn_first_offset >= offset:
                entry.txn_first_offset = -1
                self.ongoing.pop(pid, None)
            if not kept and entry.txn_first_offset < 0:
                del self.producers[pid]

    # -- snapshots ---------------------------------------------------------------------------
    def snapshot_files(self) -> list[tuple[int, Path]]:
        out = []
        for p in self.directory.glob("*.snapshot"):
            try:
                out.append((int(p.stem), p))
            except ValueError:
                continue
        return sorted(out)

    def take_snapshot(self, offset: int, keep: int = 2) -> None:
        self.write_snapshot(offset, self.snapshot_bytes(offset), keep)

    def snapshot_bytes(self, offset: int) -> bytes:
        """The snapshot file's content for the state as it is now (CRC32C, then JSON)."""
        doc = {
            "offset": offset,
            "producers": [
                {"id": e.producer_id, "epoch": e.epoch, "last_seen_ms": e.last_seen_ms,
                 "txn_first_offset": e.txn_first_offset, "coordinator_epoch": e.coordinator_epoch,
                 "batches": [[b.first_seq, b.last_seq, b.base_offset, b.last_offset, b.timestamp] for b in e.batches]}
                for e in self.producers.values()
            ],
        }
        body = json.dumps(doc, separators=(",", ":")).encode()
        return crc32c.crc32c(body).to_bytes(4, "big") + body

    def write_snapshot(self, offset: int, data: bytes, keep: int = 2) -> None:
        """Write a snapshot taken with snapshot_bytes (may run in a storage thread)."""
        write_atomically(self.directory / f"{offset:020d}.snapshot", data)
        for _, old in self.snapshot_files()[:-keep]:
            old.unlink(missing_ok=True)

    def load_snapshot(self, not_after: int, now_ms: int | None = None, expiration_ms: int | None = None) -> int:
        """Load the newest valid snapshot at or before `not_after`, leaving out producers already
        expired at `now_ms`; return its offset (0 if none)."""
        for offset, path in reversed(self.snapshot_files()):
            if offset > not_after:
                path.unlink(missing_ok=True)
                continue
            data = path.read_bytes()
            body = data[4:]
            if len(data) < 4 or int.from_bytes(data[:4], "big") != crc32c.crc32c(body):
                path.unlink(missing_ok=True)
                continue
            doc = json.loads(body)
            self.producers = {}
            self.ongoing = {}
            for p in doc["producers"]:
                e = ProducerEntry(p["id"], p["epoch"], last_seen_ms=p["last_seen_ms"],
                                  txn_first_offset=p.get("txn_first_offset", -1),
                                  coordinator_epoch=p.get("coordinator_epoch", -1))
                e.batches.extend(CachedBatch(*b) for b in p["batches"])
                if (now_ms is not None and expiration_ms is not None and now_ms - e.last_seen_ms >= expiration_ms
                        and e.txn_first_offset < 0):
                    continue
                self.producers[e.producer_id] = e
                if e.txn_first_offset >= 0:
                    self.ongoing[e.producer_id] = e.txn_first_offset
            return offset
        self.producers = {}
        self.ongoing = {}
        return 0

    def delete_snapshots(self) -> None:
        for _, p in self.snapshot_files():
            p.unlink(missing_ok=True)
