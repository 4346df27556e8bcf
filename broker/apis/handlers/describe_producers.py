"""DescribeProducers (API 61, KIP-664): the producers a replica of a partition holds state for
(id, epoch, last sequence and timestamp, the coordinator epoch of its last marker, the first offset
of its open transaction or -1): what `kafka-transactions.sh describe-producers` and `find-hanging`
read. As Kafka's, any replica answers from its own log (the admin client asks the leader unless
told a broker id); a partition not hosted here is NOT_LEADER_OR_FOLLOWER."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class DescribeProducersHandler(Handler):
    api_key = 61
    min_version = 0
    max_version = 0

    async def handle(self, ctx: RequestContext, request):
        rm = self.broker.replicas
        topics = []
        for t in request.topics:
            parts = []
            may_read = ctx.authz.allowed(AclOperation.READ, ResourceType.TOPIC, t.name)
            for index in t.partition_indexes:
                code, producers = (self._describe(ctx, rm, t.name, int(index)) if may_read
                                   else (ErrorCode.topic_authorization_failed, ()))
                parts.append(ctx.build("PartitionResponse", partition_index=index, error_code=code,
                                       error_message=None, active_producers=producers))
            topics.append(ctx.build("TopicResponse", name=t.name, partitions=tuple(parts)))
        return ctx.build("DescribeProducersResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))

    @staticmethod
    def _describe(ctx: RequestContext, rm, topic: str, index: int) -> tuple[ErrorCode, tuple]:
        record = rm.store.image.topics.get(topic)
        if record is None or not 0 <= index < record.partitions:
            return ErrorCode.unknown_topic_or_partition, ()
        part = rm.partitions.get((topic, index))
        if part is None or part.topic_id != record.topic_id:
            return ErrorCode.not_leader_or_follower, ()
        return ErrorCode.none, tuple(
            ctx.build("ProducerState", producer_id=e.producer_id, producer_epoch=e.epoch, last_sequence=e.last_seq,
                      last_timestamp=e.last_seen_ms, coordinator_epoch=e.coordinator_epoch,
                      current_txn_start_offset=e.txn_first_offset)
            for e in part.log.producer_state.producers.values())


HANDLER = DescribeProducersHandler
