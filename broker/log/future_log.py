"""A partition's "future" log (KIP-113): the copy of its log that AlterReplicaLogDirs builds in
another log dir of the same broker while the current log keeps serving.

Kafka names it `<topic>-<partition>.<id>-future` and fills it as a follower fills its log, from
the current log instead of a leader (ReplicaAlterLogDirsThread): batches byte for byte, their
offsets, epochs and CRCs kept, so producer state, leader epochs and transaction indexes follow.
This module is that copy, one bounded step at a time, on real files; when and under which lock
the future log takes the current one's place is `replica/log_dir_moves.py`'s.

What the current log does meanwhile is followed: a truncation (a follower's log diverged from
its new leader's) is applied to the future log before the next step copies anything, and a log
start that moved past what was copied (retention, DeleteRecords) restarts the copy there.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from broker.log.log import Log
from broker.protocol import records

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
_FUTURE_DIR = re.compile(r"^(.+)-(\d+)\.([0-9a-f]{32})-future$")
COPY_BYTES = 1 << 20  # per step: the event loop serves others between steps


def future_dir_name(topic: str, partition: int) -> str:
    """Kafka's UnifiedLog.logFutureDirName: `<topic>-<partition>.<32 hex digits>-future`."""
    return f"{topic}-{partition}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def delete_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}.{uuid.uuid4().hex}{DELETE_SUFFIX}"


def parse_future_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a future log's directory name, else None."""
    m = _FUTURE_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def find_future_dirs(log_dirs: list[Path]) -> list[tuple[str, int, Path]]:
    """Every `-future` directory in the log dirs (a move a restart interrupted)."""
    found = []
    for d in log_dirs:
        try:
            entries = sorted(d.iterdir())
        except OSError:
            continue
        for e in entries:
            parsed = parse_future_dir(e.name) if e.is_dir() else None
            if parsed is not None:
                found.append((parsed[0], parsed[1], e))
    return found


class FutureLogCopier:
    """Copies one partition's current log into its future log, step by step.

    `source` may change between steps (appends, truncation, log start moves, and the swap of a
    whole `Log` object after a restart re-opens it): each step reads it afresh."""

    def __init__(self, future: Log) -> None:
        self.future = future
        self._truncated_to: int | None = None  # the lowest offset the source was truncated to since the last step
        self._restart_at: int | None = None  # the source was emptied and restarted here

    def source_truncated(self, offset: int, fully: bool) -> None:
        """The current log was truncated to `offset` (fully: emptied and restarted there)."""
        if fully:
            self._restart_at = offset
            self._truncated_to = None
        else:
            self._truncated_to = offset if self._truncated_to is None else min(self._truncated_to, offset)

    def _follow_source(self, source: Log) -> None:
        future = self.future
        if self._restart_at is not None:
            future.truncate_fully_and_start_at(self._restart_at)
            self._restart_at = None
        if self._truncated_to is not None:
            if self._truncated_to < future.log_end_offset:
                future.truncate_to(self._truncated_to)
            self._truncated_to = None
        if future.log_end_offset > source.log_end_offset:  # cannot happen unless a truncation was missed
            future.truncate_to(source.log_end_offset)
        if future.log_end_offset < source.log_start_offset:
            # What comes next was deleted from the current log: start over where it now starts.
            future.truncate_fully_and_start_at(source.log_start_offset)

    def step(self, source: Log, max_bytes: int = COPY_BYTES) -> int:
        """Copy the next whole batches (up to about `max_bytes`, at least one); returns the bytes
        copied, 0 when the future log has caught up with the source's log end."""
        self._follow_source(source)
        start = self.future.log_end_offset
        if start >= source.log_end_offset:
            return 0
        region = source.read(start, max_bytes, upper_bound=source.log_end_offset, min_one=True)
        if region is None or region.length == 0:
            return 0
        data = os.pread(region.fd, region.length, region.position)
        whole = records.whole_batches_size(data)
        if whole == 0:
            return 0
        self.future.append_as_follower(data[:whole], flush_if_due=False)
        return whole

    def caught_up(self, source: Log) -> bool:
        """Whether the future log holds everything the source holds (nothing pending to follow)."""
        return (self._restart_at is None and self._truncated_to is None
                and self.future.log_end_offset == source.log_end_offset)

    def finish(self, source: Log) -> None:
        """Before the swap (caught up): the source's log start, high watermark and leader epochs
        that no batch carried (a leader's epoch starting at the log end) come over too, and
        everything is made durable, so the future log can be opened cleanly in its place."""
        future = self.future
        for epoch, start_offset in source.leader_epochs.entries:
            if epoch > future.leader_epochs.latest_epoch:
                future.leader_epochs.assign(epoch, start_offset)
        future.high_watermark = min(source.high_watermark, future.log_end_offset)
        if source.log_start_offset > future.log_start_offset:
            future.advance_log_start_offset(min(source.log_start_offset, future.high_watermark))
        future.close()  # flush, producer snapshot at the log end, files closed
