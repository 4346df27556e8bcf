"""Per-log-directory checkpoint files in Kafka's text format.

    0                      <- format version
    2                      <- number of entries
    orders 0 1234          <- topic partition offset
    orders 1 99

Written to a temporary file, fsynced and renamed (and the directory fsynced), so a crash
leaves the old or the new file, never half of one. Used for recovery points, log start offsets
and high watermarks.

A log directory also holds Kafka's clean-shutdown marker while the broker is stopped cleanly:
every log in it was flushed and its checkpoints written, so start-up need not re-scan the
active segments (only their last few KiB are checked, see Segment.tail_is_intact).
"""

from __future__ import annotations

from pathlib import Path

from broker.log.durable import write_atomically

RECOVERY_POINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET = "log-start-offset-checkpoint"
HIGH_WATERMARK = "replication-offset-checkpoint"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"

TopicPartition = tuple[str, int]


def write_checkpoint(path: Path, offsets: dict[TopicPartition, int]) -> None:
    lines = ["0", str(len(offsets))]
    lines += [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())


def read_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """Entries of a checkpoint file; a missing file is empty, a malformed one raises ValueError."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        raise ValueError(f"{path}: not a version-0 checkpoint file")
    count = int(lines[1])
    out: dict[TopicPartition, int] = {}
    for line in lines[2 : 2 + count]:
        topic, partition, offset = line.rsplit(" ", 2)
        out[(topic, int(partition))] = int(offset)
    if len(out) != count:
        raise ValueError(f"{path}: expected {count} entries, found {len(out)}")
    return out
