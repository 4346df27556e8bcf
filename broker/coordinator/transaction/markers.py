"""Sending a transaction's COMMIT/ABORT markers to the leaders of its partitions (Kafka's
TransactionMarkerChannelManager): WriteTxnMarkers (API 27, v1) over a Kafka-protocol
connection to each leader's inter-broker listener, this broker included, retried until every
partition answers NONE, or the partition's topic is gone, or the coordinator lost the shard.

Per-partition answers as Kafka's TransactionMarkerRequestCompletionHandler: NONE done;
NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, COORDINATOR_LOAD_IN_PROGRESS... retried (the leader is
looked up again); INVALID_PRODUCER_EPOCH / TRANSACTION_COORDINATOR_FENCED end the sending (a newer
coordinator or producer epoch owns the partition: nothing left for us to do there).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Callable, Any

from kio.schema.errors import ErrorCode
from kio.schema.write_txn_markers.v1.request import (WritableTxnMarker, WritableTxnMarkerTopic,
                                                     WriteTxnMarkersRequest)
from kio.static.primitive import i16, i32, i64

from broker.coordinator.transaction.inter_broker import InterBrokerConnections
from broker.network.client import ClientError
from broker.metadata import cluster_view

if TYPE_CHECKING:
    from broker.metadata.store import MetadataStore

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0
RETRY_BACKOFF_S = (0.05, 2.0)
# Answers after which the marker for that partition is not sent again.
GIVE_UP = {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced, ErrorCode.producer_fenced}

Partition = tuple[str, int]


def settled(response, asked: set[Partition]) -> tuple[set[Partition], set[Partition]]:
    """From a WriteTxnMarkers answer: (partitions whose marker is written, partitions not to be
    sent again); the rest of `asked` is retried."""
    written: set[Partition] = set()
    given_up: set[Partition] = set()
    for marker in response.markers:
        for topic in marker.topics:
            for p in topic.partitions:
                tp, code = (topic.name, int(p.partition_index)), p.error_code
                if tp not in asked:
                    continue
                if code == ErrorCode.none:
                    written.add(tp)
                elif code in GIVE_UP:
                    log.warning("marker for %s-%d refused with %s: not sent again", *tp, code.name)
                    given_up.add(tp)
                else:
                    log.info("marker for %s-%d: %s; retrying", *tp, code.name)
    return written, given_up


class MarkerSender:
    def __init__(self, store: "MetadataStore", node_id: int, listener: str, security: Any = None) -> None:
        self.store, self.node_id, self.listener = store, node_id, listener
        self._conns = InterBrokerConnections(store, listener, f"flotilla-txn-markers-{node_id}", security)
        self._locks: dict[int, asyncio.Lock] = {}
        self.sent = 0  # markers acknowledged (partition count), for metrics and tests

    async def send(self, producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                   partitions: set[Partition], still_owner: Callable[[], bool]) -> bool:
        """True once every partition has its marker (or needs none any more); False if
        `still_owner()` turned false first (a new coordinator leader will send them)."""
        remaining = set(partitions)
        backoff = RETRY_BACKOFF_S[0]
        while remaining:
            if not still_owner():
                return False
            image = self.store.image
            by_leader: dict[int, set[Partition]] = {}
            for tp in list(remaining):
                record = image.topics.get(tp[0])
                if record is None or not 0 <= tp[1] < record.partitions:
                    log.info("marker for %s-%d dropped: the partition no longer exists", *tp)
                    remaining.discard(tp)
                    continue
                state = cluster_view.partition_state(image, tp[0], tp[1])
                if state is not None and state.leader >= 0:
                    by_leader.setdefault(state.leader, set()).add(tp)
            results = await asyncio.gather(*(
                self._send_to(leader, tps, producer_id, producer_epoch, commit, coordinator_epoch)
                for leader, tps in by_leader.items()))
            progressed = False
            for done in results:
                if done:
                    progressed = True
                remaining -= done
            if remaining:
                await asyncio.sleep(backoff)
                backoff = RETRY_BACKOFF_S[0] if progressed else min(backoff * 2, RETRY_BACKOFF_S[1])
        return True

    async def _send_to(self, leader: int, tps: set[Partition], producer_id: int, producer_epoch: int,
                       commit: bool, coordinator_epoch: int) -> set[Partition]:
        """The partitions that need nothing more after this request."""
        by_topic: dict[str, list[int]] = {}
        for topic, index in sorted(tps):
            by_topic.setdefault(topic, []).append(index)
        request = WriteTxnMarkersRequest(markers=(WritableTxnMarker(
            producer_id=i64(producer_id), producer_epoch=i16(producer_epoch), transaction_result=commit,
            coordinator_epoch=i32(coordinator_epoch),
            topics=tuple(WritableTxnMarkerTopic(name=t, partition_indexes=tuple(i32(i) for i in ix))
                         for t, ix in by_topic.items())),))
        lock = self._locks.setdefault(leader, asyncio.Lock())
        async with lock:  # one request in flight per connection
            try:
                conn = await self._conns.get(leader)
                response = await conn.request(request, REQUEST_TIMEOUT_S)
            except ClientError as e:
                log.info("markers to broker %d: %s; retrying", leader, e)
                self._conns.drop(leader)
                return set()
        written, given_up = settled(response, tps)
        self.sent += len(written)
        return written | given_up

    def close(self) -> None:
        self._conns.close()
