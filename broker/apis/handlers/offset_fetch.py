"""OffsetFetch (API 9): committed offsets of one group (v1-v7) or of several (v8+, KIP-709).

A partition without a committed offset answers -1. With `require_stable` (v7+, KIP-447) a
partition with a TxnOffsetCommit not yet decided answers UNSTABLE_OFFSET_COMMIT (the consumer
retries) instead of the last committed offset. v10 names topics by id.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class OffsetFetchHandler(Handler):
    api_key = 9
    min_version = 1
    max_version = 9  # Apache Kafka 4.1 advertises v9; v10 (topic ids) is untested by any reference client

    async def handle(self, ctx: RequestContext, request):
        v = ctx.api_version
        if v < 8:
            error, topics = self._group(ctx, request.group_id, request.topics, "OffsetFetchResponseTopic",
                                        "OffsetFetchResponsePartition", getattr(request, "require_stable", False))
            if v < 2 and error != ErrorCode.none:
                # v1 has no group-level error code: every partition carries it.
                topics = tuple(ctx.build("OffsetFetchResponseTopic", name=t.name, partitions=tuple(
                    ctx.build("OffsetFetchResponsePartition", partition_index=p.partition_index, committed_offset=-1,
                              metadata="", error_code=error) for p in t.partitions)) for t in topics)
            return ctx.build("OffsetFetchResponse", throttle_time=NO_THROTTLE, topics=topics, error_code=error)
        groups = []
        for g in request.groups:
            error, topics = self._group(ctx, g.group_id, g.topics, "OffsetFetchResponseTopics",
                                        "OffsetFetchResponsePartitions", request.require_stable)
            groups.append(ctx.build("OffsetFetchResponseGroup", group_id=g.group_id, topics=topics, error_code=error))
        return ctx.build("OffsetFetchResponse", throttle_time=NO_THROTTLE, groups=tuple(groups))

    def _group(self, ctx: RequestContext, group_id: str, req_topics, topic_cls: str, part_cls: str,
               require_stable: bool = False):
        by_id = ctx.api_version >= 10
        store = self.broker.store
        authz = ctx.authz
        if not authz.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return ErrorCode.group_authorization_failed, ()
        wanted: list[tuple[object, str | None, list[int]]] | None = None
        if req_topics is not None:
            wanted = []
            for t in req_topics:
                if by_id:
                    record = store.image.topic_by_id(t.topic_id)
                    wanted.append((t.topic_id, record.name if record else None, list(t.partition_indexes)))
                else:
                    wanted.append((t.name, t.name, list(t.partition_indexes)))
        denied: set[str] = set()
        if wanted is not None and authz.enabled:
            denied = {name for _, name, _ in wanted if name is not None
                      and not authz.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, name)}
        partitions = None if wanted is None else [(name, p) for _, name, ps in wanted
                                                  if name is not None and name not in denied for p in ps]
        error, committed = self.broker.groups.fetch_offsets(group_id, partitions)
        if error != ErrorCode.none and ctx.api_version >= 2:
            return error, ()
        if wanted is None:
            grouped: dict[str, list[int]] = {}
            for (name, p) in sorted(committed):
                if authz.quietly(AclOperation.DESCRIBE, ResourceType.TOPIC, name):  # others left out
                    grouped.setdefault(name, []).append(p)
            wanted = []
            for name, ps in grouped.items():
                if by_id:
                    record = store.image.topics.get(name)
                    if record is None:
                        continue
                    wanted.append((record.topic_id, name, ps))
                else:
                    wanted.append((name, name, ps))

        unstable = self.broker.groups.pending_txn_partitions(group_id) if require_stable else set()

        def part(name: str | None, p: int):
            if name in denied:
                return ctx.build(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                 metadata="", error_code=ErrorCode.topic_authorization_failed)
            if (name, p) in unstable:
                return ctx.build(part_cls, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                                 metadata="", error_code=ErrorCode.unstable_offset_commit)
            om = committed.get((name, p)) if name is not None else None
            return ctx.build(part_cls, partition_index=p,
                             committed_offset=om.offset if om else -1,
                             committed_leader_epoch=om.leader_epoch if om else -1,
                             metadata=om.metadata if om else "",
                             error_code=ErrorCode.unknown_topic_id if name is None else ErrorCode.none)

        topics = tuple(ctx.build(topic_cls, name=ident, topic_id=ident,
                                 partitions=tuple(part(name, p) for p in ps))
                       for ident, name, ps in wanted)
        return error, topics


HANDLER = OffsetFetchHandler
