"""DescribeLogDirs (key 35, v1-4; KIP-113, KIP-827): this broker's log dirs, the size of each
partition held in them and the dirs' total/usable bytes (`kafka-log-dirs.sh --describe`, Admin
describeLogDirs / describeReplicaLogDirs). Admin clients ask every broker. The answer comes from
`replica/log_dirs.py`; a null topic list means every partition held here. As Kafka's KafkaApis, it
needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED and no dirs)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.replica import log_dirs
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class DescribeLogDirsHandler(Handler):
    api_key = 35
    min_version = 1  # Kafka 4 removed v0 (KIP-896)
    max_version = 4  # v5 (KIP-1176's cordoned dirs) is not stable in Kafka 4.1, which advertises 4

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        rm = self.broker.replicas
        wanted = None if request.topics is None else {
            (t.topic, int(p)) for t in request.topics for p in t.partitions}
        dirs = log_dirs.describe(rm.log_dirs, rm.offline_dirs, rm.partitions, wanted, rm.moves.futures())
        return ctx.build("DescribeLogDirsResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         results=tuple(self._result(ctx, d) for d in dirs))

    @staticmethod
    def _result(ctx: RequestContext, d: log_dirs.LogDirInfo):
        topics = tuple(
            ctx.build("DescribeLogDirsTopic", name=name, partitions=tuple(
                ctx.build("DescribeLogDirsPartition", partition_index=p.partition, partition_size=p.size,
                          offset_lag=p.offset_lag, is_future_key=p.is_future) for p in parts))
            for name, parts in d.topics.items())
        return ctx.build("DescribeLogDirsResult", error_code=d.error, log_dir=d.path, topics=topics,
                         total_bytes=d.total_bytes, usable_bytes=d.usable_bytes)

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return ctx.build("DescribeLogDirsResponse", throttle_time=NO_THROTTLE, error_code=code, results=())


HANDLER = DescribeLogDirsHandler
