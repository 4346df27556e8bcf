"""EndTxn (API 26): commit or abort the producer's transaction. Answered once PrepareCommit /
PrepareAbort is replicated; the coordinator writes the markers after (transaction version 1:
v5's producer id and epoch are the unchanged ones)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class EndTxnHandler(Handler):
    api_key = 26
    min_version = 0
    max_version = 5

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id,
                ErrorCode.transactional_id_authorization_failed)
        code = await self.broker.transactions.end_txn(request.transactional_id, request.producer_id,
                                                      request.producer_epoch, request.committed)
        ok = code == ErrorCode.none
        return ctx.build("EndTxnResponse", throttle_time=NO_THROTTLE, error_code=code,
                         producer_id=request.producer_id if ok else -1,
                         producer_epoch=request.producer_epoch if ok else -1)


HANDLER = EndTxnHandler
