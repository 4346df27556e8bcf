"""Stray partition logs at start-up (replica/stray_logs.py): only what the image says outright is
not placed here is set aside: deleted when the image places it elsewhere (reassigned away,
re-created under another id), kept renamed `-stray` when its topic is not in the image; anything
not yet assigned, not a partition directory, or assigned here (adding/removing replicas too) stays."""

from __future__ import annotations

import dataclasses
import uuid

from broker.metadata.store import NO_TOPIC_ID, MetadataImage, PartitionState, new_topic
from broker.replica import partition_metadata, stray_logs

ME = 3


def topic(name, states, **kw):
    t = new_topic(name, len(states), 2)
    return dataclasses.replace(t, assignment=tuple(states), **kw)


def image(*topics):
    return MetadataImage.build("c", {}, None, {t.name: t for t in topics})


def make(d, name, topic_id=None):
    (d / name).mkdir(parents=True)
    (d / name / "00000000000000000000.log").write_bytes(b"x")
    if topic_id is not None:
        partition_metadata.write(d / name, topic_id)
    return d / name


def test_only_what_the_image_rules_out_is_stray(tmp_path):
    mine = topic("mine", [PartitionState(3, 0, (3, 1), (3, 1)), PartitionState(1, 0, (1, 2), (1, 2))])
    moving = topic("moving", [PartitionState(1, 0, (1, 3), (1,), adding=(3,))])
    again = topic("again", [PartitionState(3, 0, (3,), (3,))])
    pending = dataclasses.replace(new_topic("pending", 2), topic_id=NO_TOPIC_ID)
    img = image(mine, moving, again, pending)
    make(tmp_path, "mine-0", mine.topic_id)            # a replica here
    make(tmp_path, "mine-1", mine.topic_id)            # reassigned away: stray
    make(tmp_path, "mine-7", mine.topic_id)            # beyond the assignment: left alone
    make(tmp_path, "moving-0", moving.topic_id)        # being added here: stays
    make(tmp_path, "again-0", uuid.uuid4())            # an older topic of that name: stray
    make(tmp_path, "gone-0", uuid.uuid4())             # topic deleted: stray
    make(tmp_path, "gone-no-id-2")                     # no partition.metadata, topic unknown: stray
    make(tmp_path, "pending-0")                        # not assigned yet: stays
    make(tmp_path, "not-a-partition")
    (tmp_path / "loose-0").write_text("a file, not a directory")
    found = {s.directory.name: (s.why, s.delete) for s in stray_logs.find([tmp_path], img, ME)}
    assert sorted(found) == ["again-0", "gone-0", "gone-no-id-2", "mine-1"], found
    assert "[1, 2]" in found["mine-1"][0] and "created again" in found["again-0"][0]
    assert {n: d for n, (_, d) in found.items()} == {"again-0": True, "mine-1": True,
                                                     "gone-0": False, "gone-no-id-2": False}


def test_set_aside_keeps_unknown_topics_as_stray_and_renames_the_rest_for_deletion(tmp_path):
    mine = topic("mine", [PartitionState(1, 0, (1, 2), (1, 2))])
    make(tmp_path, "gone-0", uuid.uuid4())
    make(tmp_path, "mine-0", mine.topic_id)
    strays = stray_logs.find([tmp_path], image(mine), ME)
    doomed = stray_logs.set_aside(strays)
    assert len(doomed) == 1 and doomed[0].name.startswith("mine-0.") and doomed[0].name.endswith("-delete")
    kept = stray_logs.left_over([tmp_path], stray_logs.STRAY_SUFFIX)
    assert len(kept) == 1 and kept[0].name.startswith("gone-0.") and kept[0].name.endswith("-stray")
    assert not (tmp_path / "gone-0").exists() and not (tmp_path / "mine-0").exists()
    assert stray_logs.find([tmp_path], image(mine), ME) == []  # renamed ones are not partition dirs
    assert stray_logs.left_over([tmp_path]) == doomed
    assert stray_logs.delete(doomed) == 1 and sorted(tmp_path.iterdir()) == kept


def test_parse_partition_dir():
    assert stray_logs.parse_partition_dir("a-b.c-12") == ("a-b.c", 12)
    assert stray_logs.parse_partition_dir("t-0.abc-stray") is None
    assert stray_logs.parse_partition_dir("t-x") is None
