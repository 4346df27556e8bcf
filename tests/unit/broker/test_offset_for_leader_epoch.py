"""OffsetForLeaderEpoch's answers from a real log's epoch cache; the replica manager is a stand-in
giving the handler one partition (its leadership check is tested with real brokers)."""

import asyncio
from types import SimpleNamespace

from kio.schema.errors import ErrorCode
from kio.schema.offset_for_leader_epoch.v4.request import (OffsetForLeaderEpochRequest, OffsetForLeaderPartition,
                                                           OffsetForLeaderTopic)
from kio.static.primitive import i32

from broker.log.log import Log, LogConfig
from broker.protocol import records
from broker.protocol.codec import RequestHeader
from broker.apis.handlers.base import RequestContext
from broker.apis.handlers.offset_for_leader_epoch import OffsetForLeaderEpochHandler
from tests.unit.broker.batches import make_batch


class Replicas:
    def __init__(self, part):
        self.part = part

    def leader_or_error(self, topic, partition):
        if self.part is None:
            return None, ErrorCode.not_leader_or_follower, None
        return self.part, ErrorCode.none, None


def ask(part, leader_epoch, current=-1):
    handler = OffsetForLeaderEpochHandler(SimpleNamespace(replicas=Replicas(part)))
    ctx = RequestContext(header=RequestHeader(23, 4, 1, "t", 0), connection=None)
    req = OffsetForLeaderEpochRequest(replica_id=i32(-1), topics=(OffsetForLeaderTopic(topic="t", partitions=(
        OffsetForLeaderPartition(partition=i32(0), current_leader_epoch=i32(current),
                                 leader_epoch=i32(leader_epoch)),)),))
    p = asyncio.run(handler.handle(ctx, req)).topics[0].partitions[0]
    return p.error_code, int(p.leader_epoch), int(p.end_offset)


def test_answers(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())
    for epoch, n in ((1, 2), (3, 4), (6, 1)):
        data = make_batch([b"x"] * n)
        log.append(data, records.validate_batches(data, 1 << 20), leader_epoch=epoch)
    part = SimpleNamespace(log=log, leader_epoch=6)
    assert ask(part, 6) == (ErrorCode.none, 6, 7)
    assert ask(part, 3, 6) == (ErrorCode.none, 3, 6)
    assert ask(part, 1) == (ErrorCode.none, 1, 2)
    assert ask(part, 2) == (ErrorCode.none, 1, 2)   # never a leader epoch here: the one before it
    assert ask(part, 0) == (ErrorCode.none, 0, 0)   # before every epoch: where the first began
    assert ask(part, 9) == (ErrorCode.none, -1, -1)
    assert ask(part, 6, 5)[0] == ErrorCode.fenced_leader_epoch
    assert ask(part, 6, 7)[0] == ErrorCode.unknown_leader_epoch
    assert ask(None, 6) == (ErrorCode.not_leader_or_follower, -1, -1)
