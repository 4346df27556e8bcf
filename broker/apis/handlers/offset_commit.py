"""OffsetCommit (API 8): store consumer positions in `__consumer_offsets` via the coordinator.

v10 names topics by id; ids are resolved through the metadata store (UNKNOWN_TOPIC_ID if none).
`retention_time` (v2-v4) is ignored: offsets expire by `offsets.retention.minutes`, as in
Kafka 2.1+ for clients that send the default.
As in Kafka, the answer waits (up to `offsets.commit.timeout.ms`) until the in-sync replicas of the
group's `__consumer_offsets` partition hold the commit (GroupCoordinator.commit_offsets;
immediate at replication factor 1); if they do not, Kafka's mapping of the append's error is answered.
"""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from broker.coordinator.group.group_metadata import OffsetAndMetadata
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require

DENIED = object()  # a topic the member may not read: TOPIC_AUTHORIZATION_FAILED, not committed


class OffsetCommitHandler(Handler):
    api_key = 8
    min_version = 2
    max_version = 9  # Apache Kafka 4.1 advertises v9; v10 (topic ids) is untested by any reference client

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        by_id = ctx.api_version >= 10
        now = int(time.time() * 1000)
        offsets: dict[tuple[str, int], OffsetAndMetadata] = {}
        names: list[str | None] = []
        for t in request.topics:
            if by_id:
                record = self.broker.store.image.topic_by_id(t.topic_id)
                name = record.name if record is not None else None
            else:
                name = t.name
            if name is not None and not ctx.authz.allowed(AclOperation.READ, ResourceType.TOPIC, name):
                name = DENIED
            names.append(name)
            if name is None or name is DENIED:
                continue
            for p in t.partitions:
                offsets[(name, p.partition_index)] = OffsetAndMetadata(
                    offset=p.committed_offset, leader_epoch=getattr(p, "committed_leader_epoch", -1),
                    metadata=p.committed_metadata or "", commit_timestamp_ms=now)
        results = await self.broker.groups.commit_offsets(
            group_id=request.group_id, member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            generation_id=request.generation_id_or_member_epoch, offsets=offsets)
        topics = []
        for t, name in zip(request.topics, names):
            parts = tuple(ctx.build("OffsetCommitResponsePartition", partition_index=p.partition_index,
                                    error_code=ErrorCode.unknown_topic_id if name is None
                                    else ErrorCode.topic_authorization_failed if name is DENIED
                                    else results.get((name, p.partition_index), ErrorCode.unknown_server_error))
                          for p in t.partitions)
            topics.append(ctx.build("OffsetCommitResponseTopic", name=getattr(t, "name", None),
                                    topic_id=getattr(t, "topic_id", None), partitions=parts))
        return ctx.build("OffsetCommitResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLER = OffsetCommitHandler
