"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), or by timestamp.

The answer for each partition comes from broker/apis/offset_lookup.py (what a consumer may be
told: nothing past the high watermark, OFFSET_NOT_AVAILABLE while a new leader's high watermark
lags, KIP-207; under READ_COMMITTED nothing past the last stable offset, KIP-98);
`current_leader_epoch` (v4+) is checked first (KIP-320).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis import offset_lookup
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.replica.leader_epoch_check import check_current_leader_epoch

READ_COMMITTED = 1  # isolation_level (v2+): latest is the last stable offset


class ListOffsetsHandler(Handler):
    api_key = 2
    min_version = 1
    # v10 (KIP-1075) adds a timeout for offsets held in remote storage; ours are all local, so
    # every answer is immediate and the timeout is never needed.
    max_version = 10

    async def handle(self, ctx: RequestContext, request):
        rm = self.broker.replicas
        replica_id = int(request.replica_id)
        topics = []
        for t in request.topics:
            parts = []
            may_describe = ctx.authz.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
            for p in t.partitions:
                if not may_describe:
                    answer = offset_lookup.Answer(ErrorCode.topic_authorization_failed)
                else:
                    answer = self._answer(rm, t.name, p, replica_id, ctx.api_version,
                                          int(getattr(request, "isolation_level", 0)) == READ_COMMITTED)
                parts.append(ctx.build("ListOffsetsPartitionResponse", partition_index=p.partition_index,
                                       error_code=answer.error, timestamp=answer.timestamp, offset=answer.offset,
                                       leader_epoch=answer.leader_epoch))
            topics.append(ctx.build("ListOffsetsTopicResponse", name=t.name, partitions=tuple(parts)))
        return ctx.build("ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))

    @staticmethod
    def _answer(rm, topic: str, p, replica_id: int, version: int, read_committed: bool) -> offset_lookup.Answer:
        current = int(getattr(p, "current_leader_epoch", -1))  # v4+
        part, code, _ = rm.leader_or_error(topic, p.partition_index)
        if part is None:
            held = rm.partitions.get((topic, p.partition_index))
            if held is not None:  # a follower here checks the epoch first, as Kafka's Partition does
                epoch_code = check_current_leader_epoch(current, held.leader_epoch)
                code = code if epoch_code == ErrorCode.none else epoch_code
            return offset_lookup.Answer(code)
        code = check_current_leader_epoch(current, part.leader_epoch)
        if code != ErrorCode.none:
            return offset_lookup.Answer(code)
        return offset_lookup.lookup(part.log, part.leader_epoch, part.epoch_start_offset, int(p.timestamp),
                                    replica_id, version, read_committed)


HANDLER = ListOffsetsHandler
