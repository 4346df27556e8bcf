"""bench/commands/acks_all.py reads replicas' log end offsets from segment files: batch headers only,
incrementally, ignoring a batch still being written, following a new segment."""

from __future__ import annotations

import struct

from bench.commands.acks_all import LogEnd
from tests.unit.broker.batches import make_batch


def at(base: int, batch: bytes) -> bytes:
    return struct.pack(">q", base) + batch[8:]


def test_log_end_follows_appends_partial_batches_and_new_segments(tmp_path):
    part = tmp_path / "orders-0"
    part.mkdir()
    end = LogEnd(part)
    assert end.read() == 0  # no segment yet
    first = part / f"{0:020d}.log"
    three, two = make_batch([b"a", b"b", b"c"]), make_batch([b"d", b"e"])
    first.write_bytes(at(0, three) + at(3, two)[:20])  # the second batch is half written
    assert end.read() == 3
    first.write_bytes(at(0, three) + at(3, two))
    assert end.read() == 5
    assert end.position == len(three) + len(two)  # read on from where it stopped
    (part / f"{5:020d}.log").write_bytes(at(5, make_batch([b"f"] * 4)))
    assert end.read() == 9
