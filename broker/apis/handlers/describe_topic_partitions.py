"""DescribeTopicPartitions (key 75, v0; KIP-966): the paginated topic describe of the Kafka 4 admin
client (`kafka-topics.sh --describe`, Admin describeTopics). Pages come from
`apis/topic_partitions_page.py`: at most min(response_partition_limit,
max.request.partition.size.limit) partitions (at least 1), then `next_cursor`. As Kafka: an empty
topic list means every topic; a cursor whose topic is not in a given list, or with a negative
partition, is INVALID_REQUEST for every topic asked; an unknown topic answers
UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal name). Eligible leader replicas
(KIP-966's ELR) are empty: our controller elects from the ISR alone.

ACLs, as Kafka's DescribeTopicPartitionsRequestHandler: a topic the principal may not DESCRIBE is
left out of an all-topics answer; asked by name it answers TOPIC_AUTHORIZATION_FAILED (no id, not
paged: every such topic at or after the cursor's, after the page). Each described topic carries its
authorized operations (there is no flag to ask for them).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.store import NO_TOPIC_ID
from broker.security.acl import OPERATIONS_NOT_REQUESTED, AclOperation, ResourceType
from broker.apis import topic_partitions_page
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, RequestRefused
from broker.admin.topics import TopicError, validate_topic_name


def _name_error(name: str) -> ErrorCode:
    try:
        validate_topic_name(name)
    except TopicError:
        return ErrorCode.invalid_topic_exception
    return ErrorCode.unknown_topic_or_partition


class DescribeTopicPartitionsHandler(Handler):
    api_key = 75
    min_version = 0
    max_version = 0

    async def handle(self, ctx: RequestContext, request):
        image = self.broker.store.image
        cursor = None if request.cursor is None else (request.cursor.topic_name, int(request.cursor.partition_index))
        after = cursor[0] if cursor else ""
        all_topics = not request.topics
        names = [n for n in (image.topics if all_topics else (t.name for t in request.topics)) if n >= after]
        if cursor is not None and not all_topics and cursor[0] not in names:
            raise RequestRefused(ErrorCode.invalid_request,
                                 f"the topic list should contain the cursor topic {cursor[0]}")
        if cursor is not None and cursor[1] < 0:
            raise RequestRefused(ErrorCode.invalid_request, f"the cursor's partition must be valid: {cursor[1]}")
        limit = max(min(self.broker.config["max.request.partition.size.limit"],
                        int(request.response_partition_limit)), 1)
        visible = ctx.authz.filter(AclOperation.DESCRIBE, ResourceType.TOPIC, names)
        page = topic_partitions_page.page(image, visible, cursor, limit, all_topics, _name_error)
        topics = tuple(self._topic(ctx, row) for row in page.topics)
        if not all_topics:
            topics += tuple(_refused(ctx, name, ErrorCode.topic_authorization_failed)
                            for name in sorted(set(names) - visible))
        next_cursor = None if page.next_cursor is None else ctx.build(
            "Cursor", topic_name=page.next_cursor[0], partition_index=page.next_cursor[1])
        return ctx.build("DescribeTopicPartitionsResponse", throttle_time=NO_THROTTLE, topics=topics,
                         next_cursor=next_cursor)

    @staticmethod
    def _topic(ctx: RequestContext, row: topic_partitions_page.TopicRow):
        parts = tuple(ctx.build("DescribeTopicPartitionsResponsePartition", error_code=p.error,
                                partition_index=p.index, leader_id=p.leader, leader_epoch=p.leader_epoch,
                                replica_nodes=p.replicas, isr_nodes=p.isr, eligible_leader_replicas=(),
                                last_known_elr=(), offline_replicas=p.offline)
                      for p in row.partitions)
        record = row.record
        return ctx.build("DescribeTopicPartitionsResponseTopic", error_code=row.error, name=row.name,
                         topic_id=record.topic_id if record else NO_TOPIC_ID,
                         is_internal=bool(record and record.is_internal), partitions=parts,
                         topic_authorized_operations=ctx.authz.operations(ResourceType.TOPIC, row.name))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Kafka's DescribeTopicPartitionsRequest.getErrorResponse: each asked topic with the error."""
        topics = tuple(_refused(ctx, t.name, code) for t in request.topics)
        return ctx.build("DescribeTopicPartitionsResponse", throttle_time=NO_THROTTLE, topics=topics,
                         next_cursor=None)


def _refused(ctx: RequestContext, name: str, code: ErrorCode):
    return ctx.build("DescribeTopicPartitionsResponseTopic", error_code=code, name=name, topic_id=NO_TOPIC_ID,
                     is_internal=False, partitions=(), topic_authorized_operations=OPERATIONS_NOT_REQUESTED)


HANDLER = DescribeTopicPartitionsHandler
