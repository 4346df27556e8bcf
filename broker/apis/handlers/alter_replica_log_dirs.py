"""AlterReplicaLogDirs (key 34, v1-2; KIP-113): move replicas between this broker's log dirs
(`kafka-reassign-partitions.sh` with "log_dirs" in its JSON, Admin alterReplicaLogDirs, which
sends each broker the replicas it holds). As Kafka's KafkaApis, it needs ALTER on the cluster, else
every partition answers CLUSTER_AUTHORIZATION_FAILED. A partition named under several dirs takes
the last (Kafka reads the request into a map); the answer is grouped by topic. Each partition's
error, and the move itself, are `replica/log_dir_moves.py`'s."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class AlterReplicaLogDirsHandler(Handler):
    api_key = 34
    min_version = 1  # Kafka 4 removed v0 (KIP-896)
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        wanted: dict[tuple[str, int], str] = {}
        for d in request.dirs:
            for t in d.topics:
                for p in t.partitions:
                    wanted.pop((t.name, int(p)), None)
                    wanted[(t.name, int(p))] = d.path
        moves = self.broker.replicas.moves
        by_topic: dict[str, list] = {}
        for (topic, partition), path in wanted.items():
            code = moves.alter(topic, partition, path)
            by_topic.setdefault(topic, []).append(
                ctx.build("AlterReplicaLogDirPartitionResult", partition_index=partition, error_code=code))
        return self._response(ctx, by_topic)

    @staticmethod
    def _response(ctx: RequestContext, by_topic: dict[str, list]):
        return ctx.build("AlterReplicaLogDirsResponse", throttle_time=NO_THROTTLE, results=tuple(
            ctx.build("AlterReplicaLogDirTopicResult", topic_name=topic, partitions=tuple(parts))
            for topic, parts in by_topic.items()))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Kafka's getErrorResponse: one topic entry per requested dir and topic, every partition `code`."""
        return ctx.build("AlterReplicaLogDirsResponse", throttle_time=NO_THROTTLE, results=tuple(
            ctx.build("AlterReplicaLogDirTopicResult", topic_name=t.name, partitions=tuple(
                ctx.build("AlterReplicaLogDirPartitionResult", partition_index=int(p), error_code=code)
                for p in t.partitions))
            for d in request.dirs for t in d.topics))


HANDLER = AlterReplicaLogDirsHandler
