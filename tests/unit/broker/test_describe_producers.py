"""DescribeProducers (API 61) from a real log's producer state: an idempotent producer, one with
an open transaction (its first offset), one whose transaction a marker ended (the coordinator
epoch, no open offset); partitions not hosted here or unknown. The replica manager is a stand-in
holding one partition."""

import asyncio
from types import SimpleNamespace

from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i32

from broker.log.log import Log, LogConfig
from broker.protocol import records
from broker.protocol.codec import RequestHeader
from broker.apis.handlers.base import RequestContext
from broker.apis.handlers.describe_producers import DescribeProducersHandler
from tests.unit.broker.batches import make_batch

TOPIC_ID = object()


def ask(part, partitions):
    image = SimpleNamespace(topics={"t": SimpleNamespace(partitions=2, topic_id=TOPIC_ID)})
    rm = SimpleNamespace(store=SimpleNamespace(image=image), partitions={("t", 0): part} if part else {})
    handler = DescribeProducersHandler(SimpleNamespace(replicas=rm))
    ctx = RequestContext(header=RequestHeader(61, 0, 1, "t", 0), connection=None)
    req = DescribeProducersRequest(topics=(TopicRequest(name="t", partition_indexes=tuple(i32(p) for p in partitions)),))
    return {int(p.partition_index): (p.error_code, sorted(
        (int(s.producer_id), int(s.producer_epoch), int(s.last_sequence), int(s.coordinator_epoch),
         int(s.current_txn_start_offset)) for s in p.active_producers))
        for p in asyncio.run(handler.handle(ctx, req)).topics[0].partitions}


def test_producer_states(tmp_path):
    log = Log.open(tmp_path / "t-0", "t", 0, LogConfig())

    def append(values, pid, epoch, seq, txn=False):
        data = make_batch(values, producer_id=pid, epoch=epoch, base_sequence=seq, transactional=txn)
        log.append(data, records.validate_batches(data, 1 << 20))
    append([b"a", b"b"], pid=3, epoch=0, seq=0)             # 0-1, idempotent
    append([b"c"], pid=4, epoch=2, seq=0, txn=True)          # 2, ended by the marker at 4
    append([b"d", b"e", b"f"], pid=5, epoch=1, seq=0, txn=True)  # 3-5, open
    log.append_marker(4, 2, commit=True, coordinator_epoch=7)
    part = SimpleNamespace(log=log, topic_id=TOPIC_ID)
    assert ask(part, [0, 1, 9]) == {
        0: (ErrorCode.none, [(3, 0, 1, -1, -1), (4, 2, 0, 7, -1), (5, 1, 2, -1, 3)]),
        1: (ErrorCode.not_leader_or_follower, []),  # known, not hosted here
        9: (ErrorCode.unknown_topic_or_partition, []),
    }
    # A partition of a deleted and re-created topic of that name is not this one.
    assert ask(SimpleNamespace(log=log, topic_id=object()), [0])[0] == (ErrorCode.not_leader_or_follower, [])
