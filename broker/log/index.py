"""Sparse offset and time indexes of one segment, in Kafka's on-disk entry shapes.

One entry of each per index.interval.bytes of log (see Segment._index_batch); a lookup gives
where to start scanning, and the scan makes the answer exact.

Offset index entry: relative offset (int32), file position (int32) - 8 bytes.
Time index entry: timestamp (int64), relative offset (int32) - 12 bytes.
Entries are kept in memory (a segment has at most a few hundred thousand) and appended to the
file as they are made; a torn or stale index is rebuilt from the log during recovery.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class _AppendOnlyIndex:
    entry: struct.Struct

    def __init__(self, path: Path) -> None:
        self.path = path
        self.keys: list[int] = []
        self.values: list[int] = []
        self._fd: int | None = None

    def _open(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        return self._fd

    def load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        n = len(data) // self.entry.size
        for i in range(n):
            a, b = self.entry.unpack_from(data, i * self.entry.size)
            self.keys.append(a)
            self.values.append(b)
        if len(data) % self.entry.size:
            self._rewrite()

    def _append(self, a: int, b: int) -> None:
        os.write(self._open(), self.entry.pack(a, b))
        self.keys.append(a)
        self.values.append(b)

    def truncate_entries(self, keep: int) -> None:
        del self.keys[keep:]
        del self.values[keep:]
        self._rewrite()

    def reset(self) -> None:
        self.truncate_entries(0)

    def _rewrite(self) -> None:
        self.close()
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "wb") as f:
            for a, b in zip(self.keys, self.values):
                f.write(self.entry.pack(a, b))
        os.replace(tmp, self.path)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_AppendOnlyIndex):
    """Maps relative offsets to file positions; lookups give the greatest entry <= the target."""

    entry = _OFFSET_ENTRY

    def append(self, relative_offset: int, position: int) -> None:
        if self.keys and relative_offset <= self.keys[-1]:
            return
        self._append(relative_offset, position)

    def lookup(self, relative_offset: int) -> int:
        """File position at or before the batch holding `relative_offset` (0 if none)."""
        i = bisect.bisect_right(self.keys, relative_offset) - 1
        return self.values[i] if i >= 0 else 0

    def truncate_to_position(self, position: int) -> None:
        keep = bisect.bisect_left(self.values, position)
        if keep < len(self.keys):
            self.truncate_entries(keep)


class TimeIndex(_AppendOnlyIndex):
    """Maps timestamps to relative offsets; timestamps in it only grow."""

    entry = _TIME_ENTRY

    def append(self, timestamp: int, relative_offset: int) -> None:
        if self.keys and timestamp <= self.keys[-1]:
            return
        self._append(timestamp, relative_offset)

    def lookup(self, timestamp: int) -> int:
        """Relative offset from which to scan for the first record with ts >= `timestamp`: that of
        the last entry with a timestamp <= it. Every record before that offset's batch has a
        smaller timestamp (an entry is made when the largest timestamp so far grows)."""
        i = bisect.bisect_right(self.keys, timestamp) - 1
        return self.values[i] if i >= 0 else 0

    def truncate_to_offset(self, relative_offset: int) -> None:
        keep = next((i for i, v in enumerate(self.values) if v >= relative_offset), len(self.values))
        if keep < len(self.keys):
            self.truncate_entries(keep)
