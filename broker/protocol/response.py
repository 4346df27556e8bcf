"""What a handler's answer becomes on the wire: bytes and file regions, in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Union

from broker.protocol.file_region import FileRegion

Chunk = Union[bytes, FileRegion]


@dataclass
class Response:
    """A framed response. File regions are sent with sendfile(), bytes with write()."""

    chunks: list[Chunk] = field(default_factory=list)
    close_after: bool = False
    # Called by the connection once the answer is written and drained, with when sending started
    # and ended (perf_counter_ns): the request's stage times (broker/apis/request_stages.py).
    on_sent: Optional[Callable[[int, int], None]] = None

    @property
    def size(self) -> int:
        return sum(len(c) if isinstance(c, (bytes, bytearray)) else c.length for c in self.chunks)
