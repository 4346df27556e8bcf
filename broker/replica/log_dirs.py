"""What DescribeLogDirs reports of this broker's log dirs, as Kafka's ReplicaManager.describeLogDirs.

Per configured log dir (absolute path): its total and usable bytes (KIP-827, the numbers the
`flotilla_log_dir_*_bytes` metrics show) and, for each wanted partition held in it, the log's size,
the offset lag (Kafka's: high watermark minus log end, never below 0, so 0 for every current log)
and is_future false; a replica moving to another dir (AlterReplicaLogDirs, replica/log_dir_moves.py)
is also reported in its target dir with is_future true and, as Kafka's, the offset lag of the copy
(the current log's end minus the future log's). An offline
dir answers KAFKA_STORAGE_ERROR with no topics and -1 sizes. Partitions this broker does not hold
are left out, as Kafka leaves them out; there is no per-partition error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from kio.schema.errors import ErrorCode

LONG_MAX = (1 << 63) - 1


@dataclass(frozen=True)
class PartitionDirInfo:
    partition: int
    size: int
    offset_lag: int
    is_future: bool = False


@dataclass(frozen=True)
class LogDirInfo:
    path: str
    error: ErrorCode
    total_bytes: int = -1
    usable_bytes: int = -1
    topics: dict[str, list[PartitionDirInfo]] = field(default_factory=dict)


def disk_space(path: os.PathLike | str) -> tuple[int, int] | None:
    """(total, usable) bytes of the filesystem holding `path`, as KIP-827 counts them (usable:
    what an unprivileged writer may still use), or None when it cannot be read (a failed disk:
    flotilla_log_dir_offline says so)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize


def describe(log_dirs: Iterable[Path], offline: dict[Path, str], partitions: dict,
             wanted: set[tuple[str, int]] | None, futures: dict | None = None) -> list[LogDirInfo]:
    """`partitions`: the replica manager's {(topic, index): Partition}; `wanted` None = all held;
    `futures`: {(topic, index): future Log} of the moves under way."""
    by_dir: dict[Path, dict[str, list[PartitionDirInfo]]] = {}
    futures = futures or {}
    for (topic, index), part in sorted(partitions.items()):
        if wanted is not None and (topic, index) not in wanted:
            continue
        log = part.log
        lag = max(log.high_watermark - log.log_end_offset, 0)
        by_dir.setdefault(log.directory.parent, {}).setdefault(topic, []).append(
            PartitionDirInfo(index, log.size_bytes, lag))
        future = futures.get((topic, index))
        if future is not None:
            by_dir.setdefault(future.directory.parent, {}).setdefault(topic, []).append(
                PartitionDirInfo(index, future.size_bytes, max(log.log_end_offset - future.log_end_offset, 0), True))
    out = []
    for d in log_dirs:
        path = str(Path(d).absolute())
        space = None if d in offline else disk_space(d)
        if space is None:
            out.append(LogDirInfo(path, ErrorCode.kafka_storage_error))
            continue
        total, usable = (LONG_MAX if v < 0 else v for v in space)  # Kafka's adjustForLargeFileSystems
        out.append(LogDirInfo(path, ErrorCode.none, total, usable, by_dir.get(d, {})))
    return out
