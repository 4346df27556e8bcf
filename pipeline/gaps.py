"""Catch-up mode's bookkeeping for the dead-letter query: where it stood, and the gaps it left.

With `run --catch-up parallel` a restart with a backlog does not resume the stateless dead-letter
query where its checkpoint stands: the gap `[committed, end at restart)` per raw partition becomes
a range (KIP-333's range token, `flotilla.catchup.ranges`), the query restarts from a fresh
checkpoint at the end, and a bounded batch job (`catchup.py`) works through the ranges beside it.

The ranges live in a small JSON file beside the queries' checkpoints, `<checkpoint>/catch-up/
dead-letters.json`, written atomically (temporary file, fsync, rename) *before* the old checkpoint
is replaced, so there is no moment at which the query has moved past a gap that is not recorded:

    crash before the file is written      the old checkpoint is still there: a larger gap next time
    crash between file and replacement    the next start takes max(checkpoint, file) as committed
    crash while a range is worked on      the range resumes from its progress in the file

Spark's own checkpoint is read, never written: the last committed batch's end offsets
(`commits/N`, `offsets/N`), or, before any commit, the offsets the query started at (`sources/0/0`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from flotilla.catchup.ranges import PartitionRanges, Range

QUERY = "dead-letters"


class CatchUpStateError(RuntimeError):
    """The catch-up file or the query's checkpoint cannot be used as they are."""


def _batch_ids(directory: Path) -> list[int]:
    if not directory.is_dir():
        return []
    return sorted(int(p.name) for p in directory.iterdir() if p.name.isdigit())


def _json_lines(path: Path) -> list[dict]:
    """The JSON objects of one of Spark's metadata-log files (a version line, then JSON lines;
    the Kafka source's initial-offsets file starts with a NUL byte)."""
    out = []
    for line in path.read_text(errors="replace").replace("\x00", "").splitlines():
        line = line.strip()
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def checkpoint_offsets(query_checkpoint: Path, topic: str) -> dict[int, int] | None:
    """Raw offsets the query's checkpoint has finished with (partition -> next offset), or None if
    the query never planned a batch. A batch planned but not committed does not count: Spark
    re-runs it, so its records are not done."""
    commits = _batch_ids(query_checkpoint / "commits")
    source: dict | None = None
    if commits:
        lines = _json_lines(query_checkpoint / "offsets" / str(commits[-1]))
        # offsets/N: the batch's metadata (watermark, conf), then one line per source.
        source = next((o for o in lines if topic in o), None)
        if source is None:
            raise CatchUpStateError(f"{query_checkpoint}/offsets/{commits[-1]} has no offsets of topic {topic!r}")
    else:
        initial = query_checkpoint / "sources" / "0" / "0"
        if initial.is_file():
            source = next((o for o in _json_lines(initial) if topic in o), None)
    if source is None:
        return None
    return {int(p): int(o) for p, o in source[topic].items()}


@dataclass
class GapLedger:
    """The dead-letter query's open ranges per raw partition, and where its stream started."""

    path: Path
    topic: str
    partitions: dict[int, PartitionRanges] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path, topic: str) -> "GapLedger":
        if not path.exists():
            return cls(path, topic)
        try:
            doc = json.loads(path.read_text())
            if doc["topic"] != topic:
                raise CatchUpStateError(f"{path} is for raw topic {doc['topic']!r}, not {topic!r}")
            parts = {int(p): PartitionRanges.from_commit(int(v["committed"]), v["ranges"])
                     for p, v in doc["partitions"].items()}
        except (ValueError, KeyError, TypeError) as e:
            raise CatchUpStateError(f"unreadable catch-up file {path}: {e}") from None
        return cls(path, topic, parts)

    def save(self) -> None:
        """Atomically: a reader (the next start) sees the old file or the new one, never half."""
        doc = {"topic": self.topic, "partitions": {
            str(p): {"committed": pr.committed_primary, "ranges": pr.token()} for p, pr in sorted(self.partitions.items())}}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(doc, indent=1))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # -- reading ----------------------------------------------------------------------------
    def open_ranges(self) -> dict[int, list[Range]]:
        return {p: list(pr.ranges) for p, pr in sorted(self.partitions.items()) if pr.ranges}

    def records_left(self) -> int:
        return sum(pr.records_left() for pr in self.partitions.values())

    def done(self) -> bool:
        return not any(pr.ranges for pr in self.partitions.values())

    def describe(self) -> dict[str, list[str]]:
        """Open ranges as `start-end@next` per partition (for progress events)."""
        return {str(p): [f"{r.start}-{r.end}@{r.next}" for r in ranges] for p, ranges in self.open_ranges().items()}


@dataclass
class RestartPlan:
    """How the dead-letter query starts: `starting_offsets` None means from its checkpoint as it is
    (or, without one, from the earliest offsets); otherwise a fresh checkpoint at these offsets."""

    starting_offsets: dict[int, int] | None
    new_gap: dict[int, tuple[int, int]]  # partition -> [start, end) recorded at this restart
    ledger: GapLedger


def ledger_path(checkpoint: Path) -> Path:
    return checkpoint / "catch-up" / f"{QUERY}.json"


def plan_restart(checkpoint: Path, topic: str, ends: dict[int, int]) -> RestartPlan:
    """Record the gap `[committed, ends)` of each raw partition as a range and, if there is one,
    replace the query's checkpoint so that it starts at `ends` (the log end at this restart)."""
    query_dir = checkpoint / QUERY
    ledger = GapLedger.load(ledger_path(checkpoint), topic)
    done = checkpoint_offsets(query_dir, topic)
    if done is None and not ledger.partitions:
        return RestartPlan(None, {}, ledger)  # never ran: no gap, earliest offsets as in plain mode
    new_gap: dict[int, tuple[int, int]] = {}
    starting: dict[int, int] = {}
    for p, end in sorted(ends.items()):
        known = [x for x in ((done or {}).get(p), ledger.partitions[p].committed_primary if p in ledger.partitions else None)
                 if x is not None]
        if not known:
            starting[p] = -2  # a partition the query never read: earliest, as Spark does for new ones
            continue
        pr = ledger.partitions.setdefault(p, PartitionRanges(max(known)))
        pr.committed_primary = max(known)  # a checkpoint replaced after the file was written is past it
        before = pr.committed_primary
        starting[p] = pr.recover(end)
        if starting[p] > before:
            new_gap[p] = (before, end)
    ledger.save()  # durable before the old checkpoint goes: see the module docstring
    if not new_gap and done is not None:
        return RestartPlan(None, {}, ledger)  # caught up exactly: the checkpoint resumes as it is
    # A new gap, or a replaced checkpoint whose query never planned a batch (it would start at
    # the earliest offsets, not where the file says it stands): a fresh checkpoint at `starting`.
    if query_dir.exists():
        replaced = checkpoint / f"{QUERY}.replaced"
        shutil.rmtree(replaced, ignore_errors=True)
        os.replace(query_dir, replaced)
        shutil.rmtree(replaced)
    return RestartPlan(starting, new_gap, ledger)


def refuse_open_ranges(checkpoint: Path, topic: str) -> None:
    """Plain mode after catch-up mode: fine once every range is done, an error while some are open
    (the plain query would never process them)."""
    path = ledger_path(checkpoint)
    if not path.exists():
        return
    ledger = GapLedger.load(path, topic)
    if not ledger.done():
        raise CatchUpStateError(
            f"the dead-letter query has open catch-up ranges ({ledger.records_left()} raw records,"
            f" {ledger.describe()} in {path}): run with --catch-up parallel until they are done")
