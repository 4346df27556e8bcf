"""DeleteRecords (key 21, v0-2): move partitions' log start offsets forward (KIP-107).

As Kafka's handleDeleteRecordsRequest and ReplicaManager.deleteRecords: a partition the metadata
does not know is UNKNOWN_TOPIC_OR_PARTITION; each other one is deleted on its leader here
(replica/record_deletion.py); the log start offsets are then checkpointed
(`log-start-offset-checkpoint`), so what was deleted stays deleted across a crash; if some low
watermark is still below its offset, the request waits in the purgatory
(replica/delayed_delete_records.py) until followers report the new log start in their fetches, or
until its timeout (REQUEST_TIMED_OUT for the partitions still short). A partition named twice is
answered once, for its last offset, as Kafka's map of partitions does.
"""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from broker.replica.delayed_delete_records import DelayedDeleteRecords
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.replica.record_deletion import INVALID_LOW_WATERMARK, LocalDeletion, delete_on_leader


class DeleteRecordsHandler(Handler):
    api_key = 21
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        b = self.broker
        rm = b.replicas
        wanted: dict[tuple[str, int], int] = {}
        for t in request.topics:
            for p in t.partitions:
                wanted[(t.name, int(p.partition_index))] = int(p.offset)
        results: dict[tuple[str, int], LocalDeletion] = {}
        for (topic, partition), offset in wanted.items():
            record = b.store.image.topics.get(topic)
            if not ctx.authz.allowed(AclOperation.DELETE, ResourceType.TOPIC, topic):
                results[(topic, partition)] = LocalDeletion(ErrorCode.topic_authorization_failed)
            elif record is None or not 0 <= partition < record.partitions:
                results[(topic, partition)] = LocalDeletion(ErrorCode.unknown_topic_or_partition)
            else:
                results[(topic, partition)] = delete_on_leader(rm, topic, partition, offset)
        moved = {tp: r for tp, r in results.items() if r.error == ErrorCode.none}
        if moved:
            await rm.write_checkpoints_async()
            for r in moved.values():
                if r.part is not None and r.part.log.directory.parent in rm.offline_dirs:
                    r.error, r.low_watermark = ErrorCode.kafka_storage_error, INVALID_LOW_WATERMARK
        waiting = {tp: r.requested_offset for tp, r in moved.items()
                   if r.error == ErrorCode.none and r.low_watermark < r.requested_offset}
        if waiting:
            op = DelayedDeleteRecords(rm, waiting)
            parked = time.perf_counter_ns()
            await b.delete_records_purgatory.wait(op, list(waiting), max(request.timeout.total_seconds(), 0.0))
            ctx.waited_ns += time.perf_counter_ns() - parked  # waiting is not handler time (request quota)
            for tp in waiting:
                code, low = op.results.get(tp, (ErrorCode.request_timed_out, results[tp].low_watermark))
                results[tp].error, results[tp].low_watermark = code, low
        return self._response(ctx, results)

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Every partition named answers `code` with low watermark -1 (Kafka's getErrorResponse)."""
        return self._response(ctx, {(t.name, int(p.partition_index)): LocalDeletion(code)
                                    for t in request.topics for p in t.partitions})

    @staticmethod
    def _response(ctx: RequestContext, results: dict[tuple[str, int], LocalDeletion]):
        by_topic: dict[str, list] = {}
        for (topic, partition), r in results.items():
            by_topic.setdefault(topic, []).append(ctx.build(
                "DeleteRecordsPartitionResult", partition_index=partition, error_code=r.error,
                low_watermark=r.low_watermark if r.error in (ErrorCode.none, ErrorCode.request_timed_out)
                else INVALID_LOW_WATERMARK))
        topics = tuple(ctx.build("DeleteRecordsTopicResult", name=name, partitions=tuple(parts))
                       for name, parts in by_topic.items())
        return ctx.build("DeleteRecordsResponse", throttle_time=NO_THROTTLE, topics=topics)


HANDLER = DeleteRecordsHandler
