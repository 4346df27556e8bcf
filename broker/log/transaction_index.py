"""The aborted transaction index of one segment (`<base>.txnindex`, Kafka's TransactionIndex).

A read_committed Fetch answers, beside the records, the aborted transactions they overlap
(producer id, first offset), so the consumer can drop those records; this file lets the leader
find them without reading the log. One entry per transaction whose ABORT marker was written in
this segment, in marker order, each 34 bytes big-endian as Kafka lays it out:

    version int16 (0) | producer_id int64 | first_offset int64 | last_offset int64 (the marker)
    | last_stable_offset int64 (the partition's LSO once this transaction was complete)

The file exists only once a segment has an entry. It is rebuilt from the log for every offset
the producer state replays at start-up or after a truncation, so a torn or stale tail is cut.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from broker.log.durable import fsync_path

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


class TransactionIndex:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.entries: list[AbortedTxn] = []
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        for pos in range(0, whole, ENTRY_SIZE):
            version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            if version != VERSION:
                whole = pos  # not an entry this code wrote: the rest is rebuilt from the log
                break
            self.entries.append(AbortedTxn(pid, first, last, lso))
        if whole != len(data):
            self._rewrite()

    def append(self, txn: AbortedTxn) -> None:
        """Add the entry of an ABORT marker just written (last offsets only grow)."""
        if self.entries and txn.last_offset <= self.entries[-1].last_offset:
            raise ValueError(f"{self.path.name}: aborted transaction ending at {txn.last_offset} does not follow "
                             f"{self.entries[-1].last_offset}")
        with open(self.path, "ab") as f:
            f.write(txn.encode())
        self.entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Forget transactions whose marker is at or past `offset` (the log was cut there)."""
        kept = [t for t in self.entries if t.last_offset < offset]
        if len(kept) != len(self.entries):
            self.entries = kept
            self._rewrite()

    def collect(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound): those whose marker is at
        or after the fetch offset and whose first record is below the bound."""
        return [t for t in self.entries if t.last_offset >= fetch_offset and t.first_offset < upper_bound]

    def _rewrite(self) -> None:
        if not self.entries:
            self.path.unlink(missing_ok=True)
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_bytes(b"".join(t.encode() for t in self.entries))
        os.replace(tmp, self.path)

    def flush(self) -> None:
        if self.entries and self.path.exists():
            fsync_path(self.path)

    def delete(self) -> None:
        self.entries = []
        self.path.unlink(missing_ok=True)
