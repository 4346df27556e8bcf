"""OffsetDelete (key 47, v0; KIP-496): remove a group's committed offsets of some partitions
(`kafka-consumer-groups.sh --delete-offsets`, Admin deleteConsumerGroupOffsets).

As Kafka's KafkaApis: a topic this cluster does not have, or a partition past its count, answers
UNKNOWN_TOPIC_OR_PARTITION per partition; the rest go to the group coordinator
(`GroupCoordinator.delete_offsets`): GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR and the
like answer the whole request (no topics), GROUP_SUBSCRIBED_TO_TOPIC a partition of a topic the
active group consumes. It needs DELETE on the group (else GROUP_AUTHORIZATION_FAILED for the
whole request) and READ on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions, before
asking whether it exists).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class OffsetDeleteHandler(Handler):
    api_key = 47
    min_version = 0
    max_version = 0

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.DELETE, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        image = self.broker.store.image
        readable = ctx.authz.filter(AclOperation.READ, ResourceType.TOPIC, {t.name for t in request.topics})
        results: dict[str, dict[int, ErrorCode]] = {}
        known: list[tuple[str, int]] = []
        for t in request.topics:
            record = image.topics.get(t.name)
            per = results.setdefault(t.name, {})
            for p in t.partitions:
                i = int(p.partition_index)
                if t.name not in readable:
                    per[i] = ErrorCode.topic_authorization_failed
                elif record is None or not 0 <= i < record.partitions:
                    per[i] = ErrorCode.unknown_topic_or_partition
                else:
                    known.append((t.name, i))
        top, coordinator_results = await self.broker.groups.delete_offsets(request.group_id, known)
        if top != ErrorCode.none:
            return self._answer(ctx, top, {})
        for (name, i), code in coordinator_results.items():
            results[name][i] = code
        return self._answer(ctx, ErrorCode.none, results)

    @staticmethod
    def _answer(ctx: RequestContext, top: ErrorCode, results: dict[str, dict[int, ErrorCode]]):
        topics = tuple(ctx.build("OffsetDeleteResponseTopic", name=name, partitions=tuple(
            ctx.build("OffsetDeleteResponsePartition", partition_index=i, error_code=code)
            for i, code in parts.items())) for name, parts in results.items())
        return ctx.build("OffsetDeleteResponse", error_code=top, throttle_time=NO_THROTTLE, topics=topics)

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return self._answer(ctx, code, {})  # Kafka's OffsetDeleteRequest.getErrorResponse: no topics


HANDLER = OffsetDeleteHandler
