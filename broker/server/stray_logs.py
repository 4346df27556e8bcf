"""Stray partition logs at start-up: directories a broker holds for partitions the metadata no
longer places on it (the topic was deleted while the broker was down, or a reassignment moved the
partition away meanwhile). Kafka's KRaft brokers (3.7+, KAFKA-14616) find them once the metadata
image is loaded and rename them `<topic>-<partition>.<id>-stray`; here they are renamed the same
way (so they are never opened or served again, even if deleting them is cut short) and then
deleted; a `-stray` directory left by an interrupted start is deleted at the next.

Careful by construction: `find` runs only on a metadata image read in full from the store (the
replica manager's start-up, after `store.start`), and a directory is stray only when the image says
so outright:
- no topic of its name exists; or
- the topic exists under another topic id (deleted and created again while away); or
- the topic's committed assignment has the partition and this broker is not among its replicas
  (adding and removing replicas of a reassignment count as replicas).
A topic the controller has not assigned yet (no id, no assignment, or fewer partitions placed),
or a directory whose name is not `<topic>-<number>`, is never touched.
"""

from __future__ import annotations

import logging
import re
import shutil
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from broker.metadata.store import NO_TOPIC_ID, MetadataImage
from broker.server import partition_metadata

log = logging.getLogger(__name__)

STRAY_SUFFIX = "-stray"
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


@dataclass(frozen=True)
class Stray:
    directory: Path
    topic: str
    partition: int
    why: str


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory's name, or None for anything else."""
    m = _PARTITION_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def why_stray(image: MetadataImage, node_id: int, topic: str, partition: int, topic_id: uuid.UUID | None) -> str | None:
    """Why the image says this broker should not hold the partition, or None if it may (or the
    image does not say for sure)."""
    record = image.topics.get(topic)
    if record is None:
        return "its topic no longer exists"
    if record.topic_id == NO_TOPIC_ID or record.assignment is None:
        return None  # not assigned yet: nothing is known for sure
    if topic_id is not None and topic_id != record.topic_id:
        return "its topic was deleted and created again (another topic id)"
    if partition >= len(record.assignment) or partition >= record.partitions:
        return None
    state = record.assignment[partition]
    if node_id in state.replicas or state.leader == node_id:
        return None
    return f"its replicas are {list(state.replicas)}, not this broker"


def find(log_dirs: Iterable[Path], image: MetadataImage, node_id: int) -> list[Stray]:
    """The partition directories of `log_dirs` the image does not place on this broker."""
    found = []
    for d in log_dirs:
        try:
            entries = sorted(e for e in d.iterdir() if e.is_dir())
        except OSError:
            continue  # a missing or unreadable dir: its partitions fail to open, as before
        for entry in entries:
            parsed = parse_partition_dir(entry.name)
            if parsed is None:
                continue
            why = why_stray(image, node_id, parsed[0], parsed[1], partition_metadata.read(entry))
            if why is not None:
                found.append(Stray(entry, parsed[0], parsed[1], why))
    return found


def stray_name(stray: Stray) -> str:
    """Kafka's name for a stray log: `<topic>-<partition>.<unique id>-stray`."""
    return f"{stray.topic}-{stray.partition}.{uuid.uuid4().hex}{STRAY_SUFFIX}"


def set_aside(strays: Iterable[Stray]) -> list[Path]:
    """Rename each stray directory (atomic: from then on it is never opened); the new paths.
    A rename that fails leaves the directory as it is (logged; it is not opened either)."""
    moved = []
    for s in strays:
        target = s.directory.with_name(stray_name(s))
        try:
            s.directory.rename(target)
        except OSError as e:
            log.warning("%s: stray (%s) but renaming it failed: %s", s.directory, s.why, e)
            continue
        log.warning("%s: stray log (%s), renamed to %s and deleted", s.directory, s.why, target.name)
        moved.append(target)
    return moved


def left_over(log_dirs: Iterable[Path]) -> list[Path]:
    """`-stray` directories an earlier start renamed but did not finish deleting."""
    out = []
    for d in log_dirs:
        try:
            out += sorted(e for e in d.iterdir() if e.is_dir() and e.name.endswith(STRAY_SUFFIX))
        except OSError:
            continue
    return out


def delete(paths: Iterable[Path]) -> int:
    """Delete renamed stray directories; how many went."""
    n = 0
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)
        n += not p.exists()
    return n
