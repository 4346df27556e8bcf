"""DescribeTransactions (API 65, KIP-664): state, producer and partitions of transactional ids
coordinated here (`kafka-transactions.sh describe`), without the topics the caller may not
describe."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class DescribeTransactionsHandler(Handler):
    api_key = 65
    min_version = 0
    max_version = 0

    async def handle(self, ctx: RequestContext, request):
        states = []
        for tid in request.transactional_ids:
            if not ctx.authz.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
                states.append(ctx.build(
                    "TransactionState", error_code=ErrorCode.transactional_id_authorization_failed,
                    transactional_id=tid, transaction_state="", transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=datetime.datetime.fromtimestamp(-0.001, datetime.UTC), producer_id=-1,
                    producer_epoch=-1, topics=()))
                continue
            d = self.broker.transactions.describe(tid)
            # As Kafka's handleDescribeTransactionsRequest: topics the caller may not DESCRIBE are
            # left out (Metadata hides them too).
            visible = {t for t in d.partitions if ctx.authz.quietly(AclOperation.DESCRIBE, ResourceType.TOPIC, t)}
            start = datetime.datetime.fromtimestamp(max(d.start_ms, -1) / 1000, datetime.UTC)
            states.append(ctx.build(
                "TransactionState", error_code=d.error, transactional_id=tid, transaction_state=d.state,
                transaction_timeout=datetime.timedelta(milliseconds=d.timeout_ms), transaction_start_time=start,
                producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                topics=tuple(ctx.build("TopicData", topic=t, partitions=tuple(ps)) for t, ps in d.partitions.items()
                             if t in visible)))
        return ctx.build("DescribeTransactionsResponse", throttle_time=NO_THROTTLE, transaction_states=tuple(states))


HANDLER = DescribeTransactionsHandler
