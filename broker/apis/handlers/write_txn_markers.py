"""WriteTxnMarkers (key 27, v1, the only version Kafka 4.1 serves): the transaction coordinator
tells a partition leader to end a producer's transaction there (KIP-98).

Interface for the coordinator's marker sender: one request may carry several markers, each
(producer_id, producer_epoch, transaction_result: True = COMMIT, False = ABORT, coordinator_epoch,
topics -> partition indexes). For every partition this leader writes one control batch (COMMIT or
ABORT, Kafka's control record layout, broker/protocol/control_records.py) and answers once the
in-sync replicas hold it (acks=-1, bounded by request.timeout.ms), as Kafka does. Per-partition
answers:
  NONE                            written and replicated
  UNKNOWN_TOPIC_OR_PARTITION      this broker holds no replica of it
  NOT_LEADER_OR_FOLLOWER          a replica here, but not the leader (or leadership moved meanwhile)
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT   the ISR did not (yet) confirm: retry
  INVALID_PRODUCER_EPOCH          the producer's epoch here is newer than the marker's
  TRANSACTION_COORDINATOR_FENCED  a newer coordinator epoch already wrote a marker for it
  KAFKA_STORAGE_ERROR             the partition's log dir failed
A marker written to a `__consumer_offsets` partition also tells the group coordinator
(`on_txn_marker`, when it has one) to apply or drop that producer's pending TxnOffsetCommits.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.log.log import CoordinatorFenced, LogDirOffline, ProducerFenced, StorageError
from broker.replica.partition import effective_min_isr
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import Handler, RequestContext, require

log = logging.getLogger(__name__)

OFFSETS_TOPIC = "__consumer_offsets"
REQUEST_TIMEOUT_S = 30.0  # Kafka waits request.timeout.ms (30 s by default) for the ISR


class WriteTxnMarkersHandler(Handler):
    api_key = 27
    min_version = 1
    max_version = 1

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        self.broker.quotas.exempt(ctx)  # broker-to-broker, as Kafka's sendResponseExemptThrottle
        results: list[tuple[object, list[tuple[str, list[list]]]]] = []  # marker -> topics -> [index, code]
        waiting: dict[tuple[str, int], tuple[object, int, int]] = {}
        for marker in request.markers:
            topics = []
            for t in marker.topics:
                parts = []
                for index in t.partition_indexes:
                    code, required = await self._append(t.name, int(index), marker)
                    entry = [int(index), code, required]
                    if required is not None:
                        tp = (t.name, int(index))
                        prev = waiting.get(tp)
                        if prev is None or required[2] > prev[2]:
                            waiting[tp] = required
                    parts.append(entry)
                topics.append((t.name, parts))
            results.append((marker, topics))
        replicated: dict[tuple[str, int], ErrorCode] = {}
        if waiting:
            replicated = await self.broker.replicas.wait_for_isr(waiting, REQUEST_TIMEOUT_S)
        markers_out = []
        for marker, topics in results:
            topics_out = []
            for name, parts in topics:
                parts_out = []
                for index, code, required in parts:
                    if required is not None:
                        code = replicated[(name, index)]
                        if code == ErrorCode.none and name == OFFSETS_TOPIC:
                            code = self._tell_group_coordinator(index, marker)
                    parts_out.append(ctx.build("WritableTxnMarkerPartitionResult", partition_index=index,
                                               error_code=code))
                topics_out.append(ctx.build("WritableTxnMarkerTopicResult", name=name, partitions=tuple(parts_out)))
            markers_out.append(ctx.build("WritableTxnMarkerResult", producer_id=marker.producer_id,
                                         topics=tuple(topics_out)))
        return ctx.build("WriteTxnMarkersResponse", markers=tuple(markers_out))

    async def _append(self, topic: str, index: int, marker) -> tuple[ErrorCode, tuple[object, int, int] | None]:
        """(error, what the ISR must reach or None) for one partition's marker."""
        rm = self.broker.replicas
        part, code, _ = rm.leader_or_error(topic, index)
        if part is None:
            held = rm.partitions.get((topic, index))
            if held is None:
                return ErrorCode.unknown_topic_or_partition, None
            return ErrorCode.not_leader_or_follower, None
        rs = part.replica_state
        if not rs.has_min_isr(effective_min_isr(part)):
            return ErrorCode.not_enough_replicas, None
        epoch = part.leader_epoch
        try:
            result = await rm.append_marker_async(part, int(marker.producer_id), int(marker.producer_epoch),
                                                  bool(marker.transaction_result), int(marker.coordinator_epoch))
        except ProducerFenced as e:
            log.info("%s-%d: marker refused: %s", topic, index, e)
            return ErrorCode.invalid_producer_epoch, None
        except CoordinatorFenced as e:
            log.info("%s-%d: marker refused: %s", topic, index, e)
            return ErrorCode.transaction_coordinator_fenced, None
        except StorageError as e:
            if not isinstance(e, LogDirOffline):
                log.error("%s", e)
            return ErrorCode.kafka_storage_error, None
        return ErrorCode.none, (part, epoch, result.last_offset + 1)

    def _tell_group_coordinator(self, partition: int, marker) -> ErrorCode:
        """UNKNOWN_SERVER_ERROR if the group coordinator failed to apply it (as Kafka answers)."""
        try:
            self.broker.groups.on_txn_marker(partition, int(marker.producer_id), bool(marker.transaction_result))
        except Exception:  # noqa: BLE001 - the marker is written; the offsets cache is the coordinator's
            log.exception("applying transactional offsets of producer %d on __consumer_offsets-%d failed",
                          marker.producer_id, partition)
            return ErrorCode.unknown_server_error
        return ErrorCode.none


HANDLER = WriteTxnMarkersHandler
