"""Stray partition logs at start-up: directories a broker holds for partitions the metadata no
longer places on it (the topic was deleted while the broker was down, or a reassignment moved the
partition away meanwhile). Kafka's KRaft brokers (3.7+, KAFKA-14616) find them once the metadata
image is loaded and rename them `<topic>-<partition>.<id>-stray`, never to be opened again.

Here, on the image just read in full from the store (the replica manager's start-up, after
`store.start`, before any partition is opened), a directory is stray only when the image says so
outright, and what happens depends on what it says:
- the topic's committed assignment has the partition and leaves this broker out (adding and
  removing replicas of a reassignment count as replicas), or the topic exists under another topic
  id: the metadata names the partition's current replicas or identity, so the directory is
  renamed `<topic>-<n>.<id>-delete` (Kafka's name for a log being deleted) and deleted; one an
  interrupted start left behind is deleted at the next;
- no topic of its name exists: renamed `<topic>-<n>.<id>-stray` and kept, as Kafka 4.1 keeps its
  strays. A topic deleted while the broker was down looks like this, but so does a fleet-created
  topic after its KafkaCluster was deleted and re-created over kept volumes (the garbage collector
  removed its KafkaTopic; docs/operator.md: that is not a topic deletion), so the data is never
  served again but only an operator deletes it (`rm -r <log dir>/*-stray`).
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
from broker.replica import partition_metadata

log = logging.getLogger(__name__)

STRAY_SUFFIX = "-stray"    # kept: the topic is not in the metadata
DELETE_SUFFIX = "-delete"  # deleted: the metadata places the partition elsewhere
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")


@dataclass(frozen=True)
class Stray:
    directory: Path
    topic: str
    partition: int
    why: str
    delete: bool  # False: set aside and kept (see the module docstring)


def parse_partition_dir(name: str) -> tuple[str, int] | None:
    """(topic, partition) of a partition directory's name, or None for anything else."""
    m = _PARTITION_DIR.match(name)
    return (m.group(1), int(m.group(2))) if m else None


def why_stray(image: MetadataImage, node_id: int, topic: str, partition: int,
              topic_id: uuid.UUID | None) -> tuple[str, bool] | None:
    """Why the image says this broker should not hold the partition, and whether the directory
    may be deleted; None if it may hold it (or the image does not say for sure)."""
    record = image.topics.get(topic)
    if record is None:
        return "its topic is not in the cluster metadata", False
    if record.topic_id == NO_TOPIC_ID or record.assignment is None:
        return None  # not assigned yet: nothing is known for sure
    if topic_id is not None and topic_id != record.topic_id:
        return "its topic was deleted and created again (another topic id)", True
    if partition >= len(record.assignment) or partition >= record.partitions:
        return None
    state = record.assignment[partition]
    if node_id in state.replicas or state.leader == node_id:
        return None
    return f"its replicas are {list(state.replicas)}, not this broker", True


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
            verdict = why_stray(image, node_id, parsed[0], parsed[1], partition_metadata.read(entry))
            if verdict is not None:
                found.append(Stray(entry, parsed[0], parsed[1], *verdict))
    return found


def new_name(stray: Stray) -> str:
    """Kafka's names: `<topic>-<partition>.<unique id>-stray` (kept) or `-delete` (deleted)."""
    return f"{stray.topic}-{stray.partition}.{uuid.uuid4().hex}{DELETE_SUFFIX if stray.delete else STRAY_SUFFIX}"


def set_aside(strays: Iterable[Stray]) -> list[Path]:
    """Rename each stray directory (atomic: from then on it is never opened); the renamed paths of
    those to delete. A rename that fails leaves the directory as it is (logged; not opened either)."""
    doomed = []
    for s in strays:
        target = s.directory.with_name(new_name(s))
        try:
            s.directory.rename(target)
        except OSError as e:
            log.warning("%s: stray (%s) but renaming it failed: %s", s.directory, s.why, e)
            continue
        if s.delete:
            log.warning("%s: stray log (%s): deleting it", s.directory, s.why)
            doomed.append(target)
        else:
            log.warning("%s: stray log (%s): renamed to %s, kept on disk and never served (delete it "
                        "by hand once sure the topic is gone)", s.directory, s.why, target.name)
    return doomed


def left_over(log_dirs: Iterable[Path], suffix: str = DELETE_SUFFIX) -> list[Path]:
    """Directories with the suffix: `-delete` ones an earlier start did not finish deleting, or
    the `-stray` ones kept."""
    out = []
    for d in log_dirs:
        try:
            out += sorted(e for e in d.iterdir() if e.is_dir() and e.name.endswith(suffix))
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
