"""AddOffsetsToTxn (API 25): the group's `__consumer_offsets` partition joins the transaction,
so the coordinator sends it a marker too (its TxnOffsetCommits apply at commit)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.coordinator.group.offsets_log import TOPIC as OFFSETS_TOPIC
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class AddOffsetsToTxnHandler(Handler):
    api_key = 25
    min_version = 0
    max_version = 4

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id,
                ErrorCode.transactional_id_authorization_failed)
        require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        b = self.broker
        if OFFSETS_TOPIC not in b.store.image.topics:
            await b.groups.store.ensure_topic()
        b.groups.store.refresh_partition_count()
        partition = (OFFSETS_TOPIC, b.groups.store.partition_for(request.group_id))
        code = await b.transactions.add_partitions(request.transactional_id, request.producer_id,
                                                   request.producer_epoch, {partition})
        return ctx.build("AddOffsetsToTxnResponse", throttle_time=NO_THROTTLE, error_code=code)


HANDLER = AddOffsetsToTxnHandler
