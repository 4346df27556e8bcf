"""TxnOffsetCommit (API 28): a transactional producer's consumed offsets, written to the group's
`__consumer_offsets` partition at once but applied only when the transaction commits (the group
coordinator's `txn_commit_offsets` and `on_txn_marker`). v3+ carries the member's generation,
member id and instance id (KIP-447), checked as an OffsetCommit's are."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from broker.coordinator.group.group_metadata import OffsetAndMetadata
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class TxnOffsetCommitHandler(Handler):
    api_key = 28
    min_version = 0
    # v5 is v4 on the wire; clients send it only when transaction.version 2 is finalized (KIP-890
    # part 2: the broker then adds the offsets partition to the transaction itself). We finalize
    # version 1 (handlers/api_versions.py), so v5 comes with AddOffsetsToTxn first, as v4 does.
    max_version = 5

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id,
                ErrorCode.transactional_id_authorization_failed)
        require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        now = int(time.time() * 1000)
        offsets = {(t.name, int(p.partition_index)): OffsetAndMetadata(
            offset=int(p.committed_offset), leader_epoch=int(getattr(p, "committed_leader_epoch", -1)),
            metadata=p.committed_metadata or "", commit_timestamp_ms=now)
            for t in request.topics for p in t.partitions}
        image = self.broker.store.image
        unknown = {tp for tp in offsets if tp[0] not in image.topics or not 0 <= tp[1] < image.topics[tp[0]].partitions}
        results = {tp: ErrorCode.unknown_topic_or_partition for tp in unknown}
        for t in {topic for topic, _ in offsets}:
            if not ctx.authz.allowed(AclOperation.READ, ResourceType.TOPIC, t):
                results.update({tp: ErrorCode.topic_authorization_failed for tp in offsets if tp[0] == t})
        unknown |= set(results)
        known = {tp: om for tp, om in offsets.items() if tp not in unknown}
        if known:
            results.update(await self.broker.groups.txn_commit_offsets(
                group_id=request.group_id, producer_id=int(request.producer_id),
                producer_epoch=int(request.producer_epoch), member_id=getattr(request, "member_id", ""),
                group_instance_id=getattr(request, "group_instance_id", None),
                generation_id=int(getattr(request, "generation_id", -1)), offsets=known))
        topics = tuple(ctx.build("TxnOffsetCommitResponseTopic", name=t.name, partitions=tuple(
            ctx.build("TxnOffsetCommitResponsePartition", partition_index=p.partition_index,
                      error_code=results.get((t.name, int(p.partition_index)), ErrorCode.unknown_server_error))
            for p in t.partitions)) for t in request.topics)
        return ctx.build("TxnOffsetCommitResponse", throttle_time=NO_THROTTLE, topics=topics)


HANDLER = TxnOffsetCommitHandler
