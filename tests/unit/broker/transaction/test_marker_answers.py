"""How the marker sender reads a WriteTxnMarkers answer (markers.settled): written, given up
(a newer producer or coordinator epoch owns the partition), or retried."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1.response import (WritableTxnMarkerPartitionResult, WritableTxnMarkerResult,
                                                      WritableTxnMarkerTopicResult, WriteTxnMarkersResponse)
from kio.static.primitive import i32, i64

from broker.coordinator.transaction.markers import settled


def answer(codes: dict[tuple[str, int], ErrorCode]) -> WriteTxnMarkersResponse:
    topics: dict[str, list] = {}
    for (t, p), code in codes.items():
        topics.setdefault(t, []).append(WritableTxnMarkerPartitionResult(partition_index=i32(p), error_code=code))
    return WriteTxnMarkersResponse(markers=(WritableTxnMarkerResult(producer_id=i64(7), topics=tuple(
        WritableTxnMarkerTopicResult(name=t, partitions=tuple(ps)) for t, ps in topics.items())),))


def test_written_given_up_and_retried() -> None:
    codes = {("a", 0): ErrorCode.none, ("a", 1): ErrorCode.not_leader_or_follower,
             ("b", 0): ErrorCode.invalid_producer_epoch, ("b", 1): ErrorCode.transaction_coordinator_fenced,
             ("b", 2): ErrorCode.not_enough_replicas, ("c", 0): ErrorCode.unknown_topic_or_partition,
             ("c", 1): ErrorCode.request_timed_out}
    written, given_up = settled(answer(codes), set(codes))
    assert written == {("a", 0)}
    assert given_up == {("b", 0), ("b", 1)}


def test_partitions_not_asked_are_ignored() -> None:
    written, given_up = settled(answer({("a", 0): ErrorCode.none, ("x", 9): ErrorCode.none}), {("a", 0)})
    assert (written, given_up) == ({("a", 0)}, set())
