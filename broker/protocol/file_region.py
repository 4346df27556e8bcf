"""A stretch of a file the connection sends with sendfile(): what a Fetch answer carries instead of
the records' bytes (the file is a log segment's, broker/log/segment.py's SegmentFile)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class OpenFile(Protocol):
    fd: int


@dataclass(frozen=True, slots=True)
class FileRegion:
    """Bytes `[position, position+length)` of a segment file, sent with sendfile()."""

    file: OpenFile
    position: int
    length: int

    @property
    def fd(self) -> int:
        return self.file.fd
