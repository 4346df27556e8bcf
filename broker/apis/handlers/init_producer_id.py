"""InitProducerId (key 22): for idempotent producers a fresh producer id, epoch 0; with a
transactional id the transaction coordinator's answer (epoch bump, fencing, KIP-360's
producer_id/producer_epoch of v3+ for a producer recovering its id).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.metadata.store import MetadataError
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, RequestRefused, require

log = logging.getLogger(__name__)


class InitProducerIdHandler(Handler):
    api_key = 22
    min_version = 0
    max_version = 5

    async def handle(self, ctx: RequestContext, request):
        authz = ctx.authz
        if request.transactional_id is not None:
            require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id,
                    ErrorCode.transactional_id_authorization_failed)
            pid, epoch = getattr(request, "producer_id", -1), getattr(request, "producer_epoch", -1)
            expected = (int(pid), int(epoch)) if pid != -1 else None
            timeout_ms = int(request.transaction_timeout.total_seconds() * 1000)
            r = await self.broker.transactions.init_producer_id(request.transactional_id, timeout_ms, expected)
            return ctx.build("InitProducerIdResponse", throttle_time=NO_THROTTLE, error_code=r.error,
                             producer_id=r.producer_id, producer_epoch=r.producer_epoch)
        # Kafka 3+ (KIP-679): an idempotent producer needs IDEMPOTENT_WRITE on the cluster, or WRITE
        # on some topic.
        if authz.enabled and not (authz.quietly(AclOperation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
                                  or authz.allowed_any(AclOperation.WRITE, ResourceType.TOPIC)):
            raise RequestRefused(ErrorCode.cluster_authorization_failed,
                                 f"{authz.principal} may write no topic (nor IDEMPOTENT_WRITE the cluster)")
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
