"""What a handler's answer becomes on the wire: bytes and file regions, in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from broker.protocol.file_region import FileRegion

Chunk = Union[bytes, FileRegion]


@dataclass
class Response:
    """A framed response. File regions are sent with sendfile(), bytes with write()."""

    chunks: list[Chunk] = field(default_factory=list)
    close_after: bool = False

    @property
    def size(self) -> int:
        return sum(len(c) if isinstance(c, (bytes, bytearray)) else c.length for c in self.chunks)
