"""Free TCP ports for test processes, safe when several pytest workers run at once.

`bind(0)` hands out a port from the kernel's ephemeral range, and nothing holds it between the
probe and the moment a broker or an API server binds it: two pytest-xdist workers (or a client's
outgoing connection) can be handed the same port in that gap. Under xdist each worker therefore
draws from its own block below the ephemeral range (PYTEST_XDIST_WORKER=gwN prefers block N), where
no other worker and no outgoing connection ever looks. A block is claimed with a lock file held for
the life of the worker, so two test sessions on one machine (two checkouts, a CI run beside a
developer's run) take different blocks instead of sharing gw0's. Outside xdist it is plain `bind(0)`.
"""

from __future__ import annotations

import fcntl
import itertools
import os
import re
import socket
import tempfile
from pathlib import Path
from typing import IO

#: Blocks start here and stay below the kernel's ephemeral range (32768 on Linux by default).
FIRST_PORT = 10_000
BLOCK_SIZE = 1_000
MAX_WORKERS = (32_768 - FIRST_PORT) // BLOCK_SIZE

#: Where the claims live: one lock file per block, shared by every test process on the machine.
CLAIMS_DIR = Path(tempfile.gettempdir()) / "flotilla-port-blocks"

_cursor: itertools.count | None = None
_block: range | None = None
_claim: tuple[str, range, IO[str]] | None = None


def worker_block(worker: str | None) -> range | None:
    """The port block of an xdist worker id ("gw0", "gw1", ...), or None outside xdist."""
    m = re.fullmatch(r"gw(\d+)", worker or "")
    if not m:
        return None
    index = int(m.group(1)) % MAX_WORKERS
    start = FIRST_PORT + index * BLOCK_SIZE
    return range(start, start + BLOCK_SIZE)


def claimed_block(worker: str | None) -> range | None:
    """The block this process draws from: its worker's own block if no other process on the machine
    holds it, else the next free one. None outside xdist."""
    global _claim
    preferred = worker_block(worker)
    if preferred is None:
        return None
    if _claim is not None and _claim[0] == worker:
        return _claim[1]
    CLAIMS_DIR.mkdir(parents=True, exist_ok=True)
    first = (preferred.start - FIRST_PORT) // BLOCK_SIZE
    for k in range(MAX_WORKERS):
        index = (first + k) % MAX_WORKERS
        lock = open(CLAIMS_DIR / f"block-{index}.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        if _claim is not None:
            _claim[2].close()
        start = FIRST_PORT + index * BLOCK_SIZE
        _claim = (worker or "", range(start, start + BLOCK_SIZE), lock)  # the open file holds the claim
        return _claim[1]
    raise RuntimeError(f"all {MAX_WORKERS} port blocks are claimed by other test processes ({CLAIMS_DIR})")


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
    block = claimed_block(os.environ.get("PYTEST_XDIST_WORKER"))
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
