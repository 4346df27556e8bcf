"""DescribeQuorum (key 55, v0-2; KIP-595/853): the controller quorum, answered from our
controller election (a Kubernetes Lease, or the file store's single broker), which is what
`kafka-metadata-quorum.sh describe --status/--replication` and Admin describeMetadataQuorum show.

There is no Raft log: the only partition is `__cluster_metadata-0` (a request for anything else
answers UNKNOWN_TOPIC_OR_PARTITION for each partition asked, as Kafka's KafkaRaftClient); the leader is the
controller Lease's holder (no controller: NOT_LEADER_OR_FOLLOWER for the partition), the leader
epoch how many times the Lease was taken; every live broker campaigns for the Lease, so every one
is a voter and there are no observers. Log end offsets and the high watermark are -1 (no metadata
log exists to have offsets); a voter's last fetch and last caught-up times are when this broker
last saw its registration Lease renewed. docs/admin-apis.md says the same for users.

As Kafka's controller, it needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED, top level).
"""

from __future__ import annotations

import uuid

from kio.schema.errors import ErrorCode

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import Handler, RequestContext, require

METADATA_TOPIC = "__cluster_metadata"
NO_OFFSET = -1
NO_DIRECTORY = uuid.UUID(int=0)


class DescribeQuorumHandler(Handler):
    api_key = 55
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        topics = request.topics
        if not (len(topics) == 1 and topics[0].topic_name == METADATA_TOPIC and len(topics[0].partitions) == 1
                and int(topics[0].partitions[0].partition_index) == 0):
            return self._each_partition(ctx, request, ErrorCode.unknown_topic_or_partition,
                                        "This server does not host this topic-partition.")
        store = self.broker.store
        view = store.quorum()
        if view.leader_id is None:
            partition = ctx.build("PartitionData", partition_index=0, error_code=ErrorCode.not_leader_or_follower,
                                  error_message="no controller holds the controller Lease", leader_id=-1,
                                  leader_epoch=view.leader_epoch, high_watermark=NO_OFFSET,
                                  current_voters=(), observers=())
            return self._answer(ctx, partition, ())
        voters = dict(view.voters)
        voters.setdefault(view.leader_id, -1)  # the Lease names it even while its registration lapsed
        states = tuple(ctx.build("ReplicaState", replica_id=n, replica_directory_id=NO_DIRECTORY,
                                 log_end_offset=NO_OFFSET, last_fetch_timestamp=seen,
                                 last_caught_up_timestamp=seen) for n, seen in sorted(voters.items()))
        partition = ctx.build("PartitionData", partition_index=0, error_code=ErrorCode.none, error_message=None,
                              leader_id=view.leader_id, leader_epoch=view.leader_epoch,
                              high_watermark=NO_OFFSET, current_voters=states, observers=())
        image = store.image
        nodes = []
        for n in sorted(voters):
            reg = image.brokers.get(n)
            listeners = () if reg is None else tuple(
                ctx.build("Listener", name=ep.listener, host=ep.host, port=ep.port) for ep in reg.endpoints)
            nodes.append(ctx.build("Node", node_id=n, listeners=listeners))
        return self._answer(ctx, partition, tuple(nodes))

    @staticmethod
    def _answer(ctx: RequestContext, partition, nodes):
        topic = ctx.build("TopicData", topic_name=METADATA_TOPIC, partitions=(partition,))
        return ctx.build("DescribeQuorumResponse", error_code=ErrorCode.none, error_message="",
                         topics=(topic,), nodes=nodes)

    @staticmethod
    def _each_partition(ctx: RequestContext, request, code: ErrorCode, message: str):
        """Kafka's DescribeQuorumRequest.getPartitionLevelErrorResponse: every partition asked
        carries the error, the other fields at their defaults."""
        topics = tuple(ctx.build("TopicData", topic_name=t.topic_name, partitions=tuple(
            ctx.build("PartitionData", partition_index=p.partition_index, error_code=code, error_message=message,
                      leader_id=0, leader_epoch=0, high_watermark=0, current_voters=(), observers=())
            for p in t.partitions)) for t in request.topics)
        return ctx.build("DescribeQuorumResponse", error_code=ErrorCode.none, error_message="", topics=topics,
                         nodes=())

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return ctx.build("DescribeQuorumResponse", error_code=code, error_message=message, topics=(), nodes=())


HANDLER = DescribeQuorumHandler
