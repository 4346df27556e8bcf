"""Reassignment metrics (replica/reassignment_metrics.py): bytes count only for replicas a
reassignment is adding (in: appended by such a replica here; out: sent to such a follower)."""

from __future__ import annotations

import dataclasses

from broker.metadata.store import MetadataImage, PartitionState, new_topic
from broker.replica import reassignment_metrics as rm


def image():
    moving = PartitionState(1, 3, (1, 4, 2), (1, 2), adding=(4,), removing=(2,))
    still = PartitionState(1, 3, (1, 2), (1, 2))
    t = dataclasses.replace(new_topic("t", 2, 2), assignment=(moving, still))
    return MetadataImage.build("c", {}, None, {"t": t})


def test_bytes_in_only_on_an_adding_replica():
    c = rm.ReassignmentBytes()
    rm.count_in(c, image(), "t", 0, 4, 100)
    rm.count_in(c, image(), "t", 0, 2, 50)   # a removing replica
    rm.count_in(c, image(), "t", 1, 4, 70)   # not moving
    rm.count_in(c, image(), "u", 0, 4, 30)   # unknown topic
    assert (c.bytes_in, c.bytes_out) == (100, 0)


def test_bytes_out_only_to_an_adding_follower():
    c = rm.ReassignmentBytes()

    class P:
        def __init__(self, index, size):
            self.partition_index, self.records_size = index, size

    class T:
        def __init__(self, name, parts):
            self.name, self.partitions = name, parts
    rm.count_out(c, image(), [T("t", [P(0, 300), P(1, 40)])], replica_id=4)
    rm.count_out(c, image(), [T("t", [P(0, 500)])], replica_id=2)
    assert (c.bytes_in, c.bytes_out) == (0, 300)
