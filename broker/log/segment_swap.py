"""The files of a segment swap, and finishing or undoing one a crash interrupted.

The log cleaner replaces closed segments as Kafka's does: the new segment is written as
`.cleaned`, renamed to `.swap`, the old segments' files get `.deleted`, and the `.swap` takes
its final name. The log loader (`Log.open`) and the cleaner both need these steps, so they live
here, apart from either."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Iterator

from broker.log.durable import fsync_directory
from broker.log.segment import SegmentFile, segment_name
from broker.protocol import records
from broker.protocol.records import BatchHeader

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20
SUFFIXES = (".log", ".index", ".timeindex")


def iter_batches(file: SegmentFile, size: int, read_chunk: int = READ_CHUNK) -> Iterator[tuple[BatchHeader, bytes]]:
    """(header, bytes) of each batch in the first `size` bytes of a segment file, read
    `read_chunk` bytes at a time (a batch larger than that in one read of its own)."""
    pos = 0
    while pos < size:
        chunk = os.pread(file.fd, min(read_chunk, size - pos), pos)
        off = 0
        while True:
            n = records.peek_size(chunk, off)
            if n is None or n < records.HEADER_SIZE or off + n > len(chunk):
                break
            yield records.read_header(chunk, off), chunk[off:off + n]
            off += n
        if off == 0:  # one batch larger than a chunk
            n = records.peek_size(chunk, 0)
            if n is None or n < records.HEADER_SIZE or pos + n > size:
                return
            data = os.pread(file.fd, n, pos)
            yield records.read_header(data), data
            off = n
        pos += off


def paths(directory: Path, base: int, suffix: str = "") -> list[Path]:
    return [directory / (segment_name(base, s) + suffix) for s in SUFFIXES]


def remove_files(directory: Path, base: int, suffix: str) -> None:
    for p in paths(directory, base, suffix):
        p.unlink(missing_ok=True)


def last_offset_of(path: Path, base: int) -> int:
    """Offset of the last whole batch of a segment file (base - 1 if it has none)."""
    last = base - 1
    with open(path, "rb") as f:
        file = SegmentFile(os.dup(f.fileno()))
        for h, _ in iter_batches(file, os.fstat(f.fileno()).st_size):
            last = h.last_offset
    return last


def recover_interrupted_clean(directory: Path) -> set[int]:
    """Finish or undo a swap a crash interrupted (Kafka's LogLoader): `.cleaned` and `.deleted`
    files go; a `.log.swap` replaces every segment whose base offset lies in its offset range.
    Returns the base offsets of swapped-in segments, whose indexes recovery must rebuild."""
    for p in list(directory.glob("*.cleaned")) + list(directory.glob("*.deleted")):
        p.unlink(missing_ok=True)
    swapped = set()
    for swap in sorted(directory.glob("*.log.swap")):
        base = int(swap.name.split(".")[0])
        last = last_offset_of(swap, base)
        for p in directory.glob("*.log"):
            if p.stem.isdigit() and base <= int(p.stem) <= max(last, base):
                remove_files(directory, int(p.stem), "")
        remove_files(directory, base, "")
        os.rename(swap, directory / segment_name(base, ".log"))
        log.warning("%s: completed a log cleaner swap interrupted by a crash (segment %d)", directory, base)
        swapped.add(base)
    for p in directory.glob("*.swap"):
        p.unlink(missing_ok=True)
    return swapped


def finish_swap(directory: Path) -> None:
    """After a swap (off the loop): make the renames durable and delete the old files."""
    fsync_directory(directory)
    for p in directory.glob("*.deleted"):
        p.unlink(missing_ok=True)
