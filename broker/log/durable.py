"""Durable writes. Small files are written so that a crash leaves the old or the new version,
never half of one, and the rename itself survives: temp file, fsync, rename, fsync of the
directory. fsync calls that would stall the event loop run in STORAGE_IO, a small thread pool
(Kafka flushes from its background scheduler threads the same way)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

STORAGE_IO = ThreadPoolExecutor(max_workers=4, thread_name_prefix="storage-io")


def fsync_data(fd: int) -> None:
    """fsync a segment file's data (blocking: call it from STORAGE_IO on a serving broker)."""
    os.fsync(fd)


def fsync_path(path: Path) -> None:
    """fsync a file by name (Linux flushes the file, whichever descriptor asks); a file deleted
    meanwhile needs nothing."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_directory(directory: Path) -> None:
    """Make renames, creations and deletions of entries in `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data`. On failure (a full disk) the temporary file is removed."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)
