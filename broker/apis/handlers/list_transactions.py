"""ListTransactions (API 66, KIP-664): the transactional ids coordinated here, filtered by state,
producer id, (v1, KIP-994) how long they have been ongoing and (v2, KIP-1152) a regular expression
the whole transactional id must match (INVALID_REGULAR_EXPRESSION when it does not compile). Unknown
state names are echoed in unknown_state_filters, as Kafka does."""

from __future__ import annotations

import re

from kio.schema.errors import ErrorCode

from broker.coordinator.transaction.state import TxnState
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class ListTransactionsHandler(Handler):
    api_key = 66
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        states = set(request.state_filters)
        unknown = tuple(s for s in request.state_filters if TxnState.from_kafka_name(s) is None)
        duration = getattr(request, "duration_filter", -1)
        pattern = getattr(request, "transactional_id_pattern", None)
        try:
            matcher = re.compile(pattern).fullmatch if pattern else None
        except re.error:
            return ctx.build("ListTransactionsResponse", throttle_time=NO_THROTTLE,
                             error_code=ErrorCode.invalid_regular_expression, unknown_state_filters=(),
                             transaction_states=())
        code, listed = self.broker.transactions.list_transactions(
            states, {int(p) for p in request.producer_id_filters}, int(duration))
        if matcher is not None:
            listed = [t for t in listed if matcher(t.transactional_id)]
        return ctx.build("ListTransactionsResponse", throttle_time=NO_THROTTLE, error_code=code,
                         unknown_state_filters=unknown, transaction_states=tuple(
                             ctx.build("TransactionState", transactional_id=t.transactional_id,
                                       producer_id=t.producer_id, transaction_state=t.state) for t in listed
                             if ctx.authz.quietly(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID,
                                                  t.transactional_id)))


HANDLER = ListTransactionsHandler
