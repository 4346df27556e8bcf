"""OffsetForLeaderEpoch (key 23, KIP-101/279/320): where a leader epoch ended in this leader's log.

A follower asks it after a leader change to find the offset its log may have diverged from the
leader's, and truncates there; a consumer asks it after a leader change to check that its
position (with the epoch of the record it last read) still exists on the new leader. The answer
comes from the partition's leader epoch cache (broker/log/leader_epoch.py): for the current
epoch the log end offset, for an older one the start offset of the next larger epoch, and
UNDEFINED (-1, -1) for an epoch past every one known. `current_leader_epoch` (when not -1) must
be this leader's epoch: an older one is FENCED_LEADER_EPOCH, a newer one UNKNOWN_LEADER_EPOCH.
A follower's request (`replica_id` >= 0) on a connection where that broker's follower fetches were
accepted (handlers/fetch.py, follower_identity) is replication, exempt from client quotas.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.replica.leader_epoch_check import check_current_leader_epoch


class OffsetForLeaderEpochHandler(Handler):
    api_key = 23
    min_version = 2  # Kafka 4 removed v0-1 (KIP-896)
    max_version = 4

    async def handle(self, ctx: RequestContext, request):
        replica_id = int(getattr(request, "replica_id", -1))  # v3+
        if replica_id >= 0 and getattr(ctx.connection, "broker_id", None) == replica_id:
            self.broker.quotas.exempt(ctx)
        rm = self.broker.replicas
        authz = ctx.authz
        # Kafka: brokers (CLUSTER_ACTION) may ask about any topic, consumers (KIP-320) about those
        # they may describe.
        cluster_action = authz.quietly(AclOperation.CLUSTER_ACTION, ResourceType.CLUSTER, CLUSTER_NAME)
        topics = []
        for t in request.topics:
            parts = []
            allowed = cluster_action or authz.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
            for p in t.partitions:
                code, epoch, end = ErrorCode.none, UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
                if not allowed:
                    parts.append(ctx.build("EpochEndOffset", error_code=ErrorCode.topic_authorization_failed,
                                           partition=p.partition, leader_epoch=epoch, end_offset=end))
                    continue
                part, code, _ = rm.leader_or_error(t.topic, p.partition)
                if part is not None:
                    code = check_current_leader_epoch(p.current_leader_epoch, part.leader_epoch)
                    if code == ErrorCode.none:
                        epoch, end = part.log.leader_epochs.end_offset_for(p.leader_epoch, part.log.log_end_offset)
                        if end == UNDEFINED_EPOCH_OFFSET:
                            epoch = UNDEFINED_EPOCH
                parts.append(ctx.build("EpochEndOffset", error_code=code, partition=p.partition,
                                       leader_epoch=epoch, end_offset=end))
            topics.append(ctx.build("OffsetForLeaderTopicResult", topic=t.topic, partitions=tuple(parts)))
        return ctx.build("OffsetForLeaderEpochResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLER = OffsetForLeaderEpochHandler
