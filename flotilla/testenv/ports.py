"""Free TCP ports for test processes, safe when several pytest workers run at once.

`bind(0)` hands out a port from the kernel's ephemeral range, and nothing holds it between the
probe and the moment a broker or an API server binds it: two pytest-xdist workers (or a client's
outgoing connection) can be handed the same port in that gap. Under xdist each worker therefore
draws from its own block below the ephemeral range (PYTEST_XDIST_WORKER=gwN picks block N), where
no other worker and no outgoing connection ever looks. Outside xdist it is plain `bind(0)`.
"""

from __future__ import annotations

import itertools
import os
import re
import socket

#: Blocks start here and stay below the kernel's ephemeral range (32768 on Linux by default).
FIRST_PORT = 10_000
BLOCK_SIZE = 2_000
MAX_WORKERS = (32_768 - FIRST_PORT) // BLOCK_SIZE

_cursor: itertools.count | None = None
_block: range | None = None


def worker_block(worker: str | None) -> range | None:
    """The port block of an xdist worker id ("gw0", "gw1", ...), or None outside xdist."""
    m = re.fullmatch(r"gw(\d+)", worker or "")
    if not m:
        return None
    index = int(m.group(1)) % MAX_WORKERS
    start = FIRST_PORT + index * BLOCK_SIZE
    return range(start, start + BLOCK_SIZE)


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, and that no other worker of this
    test session will be handed."""
    global _cursor, _block
    block = worker_block(os.environ.get("PYTEST_XDIST_WORKER"))
    if block is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    if _block != block:
        _block, _cursor = block, itertools.count()
    assert _cursor is not None
    # Walk the block round-robin, so a port handed out is not handed out again until the block wraps.
    for _ in range(len(block)):
        port = block[next(_cursor) % len(block)]
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port in {block.start}-{block.stop - 1} (worker block exhausted)")
