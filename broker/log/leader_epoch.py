"""Leader epochs of one partition: which epoch's leader wrote from which offset on (KIP-101/279).

Kept in the partition directory as Kafka's `leader-epoch-checkpoint`, the same text format as
the other checkpoints but with "epoch startOffset" lines:

    0                      <- format version
    2                      <- number of entries
    0 0                    <- epoch 0 started at offset 0
    3 1200                 <- epoch 3 started at offset 1200

Maintained as Kafka's LeaderEpochFileCache: an entry is added when a batch with a new epoch is
appended (or a leader takes over at the log end), removed from the end when the log is
truncated and from the start when the log start offset moves. OffsetForLeaderEpoch and a
truncating follower ask it where an epoch ended.

Every change replaces the file at once (temp file and rename, no fsync: a leader change or a
truncation on thousands of partitions must not stall the event loop on thousands of fsyncs);
the log makes it durable (fsync, rename, directory fsync) whenever it moves its recovery point.
That is enough: at start-up the segments past the recovery point are scanned again and their
batches' epochs added (see Log._load_leader_epochs), and a torn or missing file is rebuilt
from every batch header.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

import os

from broker.log.durable import fsync_directory, fsync_path

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """(epoch, start offset) entries of the file; None if it is missing. A malformed file raises
    ValueError naming it."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"{path}: not a version-0 leader epoch checkpoint")
    try:
        count = int(lines[1])
        entries = [(int(e), int(o)) for e, o in (line.split() for line in lines[2:2 + count])]
    except ValueError as e:
        raise ValueError(f"{path}: malformed entry: {e}") from None
    if len(entries) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(entries)}")
    return entries


class LeaderEpochCache:
    """Epoch -> start offset, both strictly increasing, persisted on every change."""

    def __init__(self, directory: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        self.epochs: list[int] = [e for e, _ in entries or []]
        self.starts: list[int] = [o for _, o in entries or []]
        self.unsynced = False  # the file changed since it was last made durable

    @classmethod
    def load(cls, directory: Path) -> "LeaderEpochCache | None":
        """The cache from its file, or None if there is no (readable) file to rebuild it from the log."""
        try:
            entries = read_epoch_checkpoint(directory / LEADER_EPOCH_CHECKPOINT)
        except ValueError as e:
            log.warning("%s; rebuilding it from the log", e)
            return None
        return None if entries is None else cls(directory, entries)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self.epochs, self.starts))

    @property
    def latest_epoch(self) -> int:
        return self.epochs[-1] if self.epochs else UNDEFINED_EPOCH

    def file_bytes(self) -> bytes:
        lines = ["0", str(len(self.epochs))] + [f"{e} {o}" for e, o in zip(self.epochs, self.starts)]
        return ("\n".join(lines) + "\n").encode()

    def flush(self) -> None:
        """Replace the file with the entries as they are now (not yet durable: see sync_job)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(self.file_bytes())
            os.replace(tmp, self.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        self.unsynced = True

    def sync_job(self):
        """A callable (for a storage thread) that makes the entries as they are now durable, or
        None if the file already is."""
        if not self.unsynced:
            return None
        self.unsynced = False
        path = self.path

        def job() -> None:
            try:
                fsync_path(path)  # the file as it is now: these entries or newer ones
                fsync_directory(path.parent)
            except FileNotFoundError:
                pass  # the partition was deleted meanwhile
            except BaseException:
                self.unsynced = True
                raise

        return job

    # -- changes -----------------------------------------------------------------------------
    def assign(self, epoch: int, start_offset: int, flush: bool = True) -> bool:
        """Epoch `epoch` starts at `start_offset`. Nothing changes unless the epoch is new or starts
        earlier than recorded; entries the new one contradicts (an epoch as large, or a start as
        late) are dropped, as Kafka does. Returns whether the cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        if self.epochs and epoch == self.epochs[-1] and start_offset >= self.starts[-1]:
            return False
        removed = []
        while self.epochs and (self.epochs[-1] >= epoch or self.starts[-1] >= start_offset):
            removed.append((self.epochs.pop(), self.starts.pop()))
        if len(removed) > 1 or (removed and removed[0][1] != start_offset):
            log.warning("%s: epoch %d at offset %d replaced entries %s", self.path.parent.name, epoch,
                        start_offset, removed[::-1])
        self.epochs.append(epoch)
        self.starts.append(start_offset)
        if flush:
            self.flush()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at `end_offset`: epochs starting at or past it are gone."""
        keep = bisect.bisect_left(self.starts, end_offset)
        if keep < len(self.starts):
            del self.epochs[keep:], self.starts[keep:]
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: epochs wholly before it are gone and the epoch
        holding it starts there."""
        n = bisect.bisect_right(self.starts, start_offset)
        if n == 0 or (n == 1 and self.starts[0] == start_offset):
            return
        epoch = self.epochs[n - 1]
        del self.epochs[:n], self.starts[:n]
        self.epochs.insert(0, epoch)
        self.starts.insert(0, start_offset)
        self.flush()

    def clear(self) -> None:
        if self.epochs:
            self.epochs.clear()
            self.starts.clear()
        self.flush()

    # -- questions ---------------------------------------------------------------------------
    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers: for the latest epoch the log end;
        for an older one the start of the next larger epoch, with the largest known epoch not
        above the requested one; UNDEFINED for an epoch past every known one."""
        if requested_epoch == UNDEFINED_EPOCH or not self.epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self.epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self.epochs, requested_epoch)
        if higher == len(self.epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return requested_epoch, self.starts[0]
        return self.epochs[higher - 1], self.starts[higher]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose leader wrote `offset` (UNDEFINED before the first entry)."""
        i = bisect.bisect_right(self.starts, offset) - 1
        return self.epochs[i] if i >= 0 else UNDEFINED_EPOCH
