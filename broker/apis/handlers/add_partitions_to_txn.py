"""AddPartitionsToTxn (API 24): a producer's partitions join its ongoing transaction.

v0-v3 (clients): one transaction; topics this broker does not know answer
UNKNOWN_TOPIC_OR_PARTITION and the rest OPERATION_NOT_ATTEMPTED, nothing added (as Kafka).
v4+ (brokers, KIP-890 part 1): a batch of transactions, each either added or, with
verify_only, checked (is each partition in the ongoing transaction?).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class AddPartitionsToTxnHandler(Handler):
    api_key = 24
    min_version = 0
    max_version = 5

    def _unknown(self, partitions: set[tuple[str, int]]) -> set[tuple[str, int]]:
        topics = self.broker.store.image.topics
        return {tp for tp in partitions if tp[0] not in topics or not 0 <= tp[1] < topics[tp[0]].partitions}

    async def _one(self, tid: str, pid: int, epoch: int, partitions: set[tuple[str, int]],
                   verify_only: bool) -> dict[tuple[str, int], ErrorCode]:
        txns = self.broker.transactions
        if verify_only:
            return txns.verify_partitions(tid, pid, epoch, partitions)
        unknown = self._unknown(partitions)
        if unknown:
            return {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                    for tp in partitions}
        code = await txns.add_partitions(tid, pid, epoch, partitions)
        return {tp: code for tp in partitions}

    def _topic_results(self, ctx: RequestContext, results: dict[tuple[str, int], ErrorCode]) -> tuple:
        by_topic: dict[str, list] = {}
        for (topic, index), code in sorted(results.items()):
            by_topic.setdefault(topic, []).append(
                ctx.build("AddPartitionsToTxnPartitionResult", partition_index=index, partition_error_code=code))
        return tuple(ctx.build("AddPartitionsToTxnTopicResult", name=t, results_by_partition=tuple(rs))
                     for t, rs in by_topic.items())

    async def handle(self, ctx: RequestContext, request):
        if ctx.api_version < 4:
            require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.v3_and_below_transactional_id,
                    ErrorCode.transactional_id_authorization_failed)
            partitions = {(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions}
            denied = {t for t, _ in partitions if not ctx.authz.allowed(AclOperation.WRITE, ResourceType.TOPIC, t)}
            if denied:  # Kafka: the topics refused, the others not attempted
                return ctx.build("AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE,
                                 results_by_topic_v3_and_below=self._topic_results(ctx, {
                                     tp: ErrorCode.topic_authorization_failed if tp[0] in denied
                                     else ErrorCode.operation_not_attempted for tp in partitions}))
            results = await self._one(request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
                                      request.v3_and_below_producer_epoch, partitions, False)
            return ctx.build("AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE,
                             results_by_topic_v3_and_below=self._topic_results(ctx, results))
        # v4+ is brokers verifying transactions (KIP-890): Kafka wants CLUSTER_ACTION.
        require(ctx, AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME,
                ErrorCode.cluster_authorization_failed)
        out = []
        for txn in request.transactions:
            partitions = {(t.name, int(p)) for t in txn.topics for p in t.partitions}
            results = await self._one(txn.transactional_id, txn.producer_id, txn.producer_epoch, partitions,
                                      txn.verify_only)
            out.append(ctx.build("AddPartitionsToTxnResult", transactional_id=txn.transactional_id,
                                 topic_results=self._topic_results(ctx, results)))
        return ctx.build("AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         results_by_transaction=tuple(out))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        if ctx.api_version < 4:
            results = {(t.name, int(p)): code for t in request.v3_and_below_topics for p in t.partitions}
            return ctx.build("AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE,
                             results_by_topic_v3_and_below=self._topic_results(ctx, results))
        return ctx.build("AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE, error_code=code,
                         results_by_transaction=())


HANDLER = AddPartitionsToTxnHandler
