"""The process's file-descriptor budget: raise the soft limit at start, and tell how many
descriptors are free so topic creation can refuse what this broker could not open.

Every open partition holds descriptors (its active segment's log, offset index and time index
files, plus older segments' log files), every client connection one more. Past the limit,
accept() and open() fail with EMFILE: clients are refused and a restart cannot open the logs.
"""

from __future__ import annotations

import logging
import os
import resource

log = logging.getLogger(__name__)

# Descriptors a new partition takes: its segment's .log, .index and .timeindex.
PER_PARTITION = 3
# Kept free for client connections, checkpoints, snapshots and the metrics listener: an eighth
# of the limit, at most 512.
MAX_RESERVE = 512


def raise_soft_limit() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit (as Kafka's start scripts expect an
    operator to); returns (old soft, new soft)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            target = int(open("/proc/sys/fs/nr_open").read())
        except (OSError, ValueError):
            target = 1 << 20
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            log.info("raised the open-file limit (RLIMIT_NOFILE) from %d to %d", soft, target)
            return soft, target
        except (ValueError, OSError) as e:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, e)
    return soft, soft


def limit() -> int:
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def in_use() -> int:
    """Open descriptors. Since Linux 6.2 the size of /proc/self/fd is their count, read in
    constant time; listing the directory (older kernels) costs as much as there are open, 30,000
    with 10,000 partitions, and topic creation asks once per topic."""
    try:
        counted = os.stat("/proc/self/fd").st_size
        return counted if counted > 0 else len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def free() -> int:
    """Descriptors this process can still open, minus the reserve kept for connections."""
    n = limit()
    return n - in_use() - min(MAX_RESERVE, n // 8)
