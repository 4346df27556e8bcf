"""InitProducerId (key 22) for idempotent producers: a fresh producer id, epoch 0.

With a transactional id this becomes the transaction coordinator's job (KIP-98, a later issue);
until then such requests get TRANSACTIONS_REFUSED, as FindCoordinator and Produce do.
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.metadata.store import MetadataError
from broker.server.handlers.base import NO_THROTTLE, TRANSACTIONS_REFUSED, Handler, RequestContext

log = logging.getLogger(__name__)


class InitProducerIdHandler(Handler):
    api_key = 22
    min_version = 0
    max_version = 5

    async def handle(self, ctx: RequestContext, request):
        if request.transactional_id is not None:
            log.warning("client %s asked for transactional id %r: transactions are not supported yet",
                        ctx.client_id, request.transactional_id)
            return ctx.build("InitProducerIdResponse", throttle_time=NO_THROTTLE,
                             error_code=TRANSACTIONS_REFUSED, producer_id=-1,
                             producer_epoch=-1)
        try:
            pid = await self.broker.producer_ids.next_id()
        except MetadataError as e:
            # Kafka answers this way when the controller cannot give a block yet: the client retries.
            log.warning("no producer-id block from the cluster metadata: %s", e)
            return ctx.build("InitProducerIdResponse", throttle_time=NO_THROTTLE,
                             error_code=ErrorCode.coordinator_load_in_progress, producer_id=-1, producer_epoch=-1)
        return ctx.build("InitProducerIdResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         producer_id=pid, producer_epoch=0)


HANDLER = InitProducerIdHandler
