"""AlterPartitionReassignments (key 45, KIP-455; v1 adds KIP-860's allow_replication_factor_change):
start or cancel partition reassignments (`kafka-reassign-partitions.sh --execute/--cancel`,
Admin.alterPartitionReassignments). Served by the controller, which records the reassignment in
the partition's record (controller/reassignment.py); any other broker answers NOT_CONTROLLER and
the client retries against the controller Metadata names (as for ElectLeaders and CreateTopics).

Per partition: NONE once the reassignment is recorded (it then proceeds on its own),
NO_REASSIGNMENT_IN_PROGRESS (a cancel of none), INVALID_REPLICA_ASSIGNMENT (empty, a broker
twice, a broker not registered), INVALID_REPLICATION_FACTOR (v1 without leave to change it),
UNKNOWN_TOPIC_OR_PARTITION. It needs ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED, at
the top and for every partition, checked before NOT_CONTROLLER: Kafka's brokers forward it to the
controller, which checks).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class AlterPartitionReassignmentsHandler(Handler):
    api_key = 45
    min_version = 0
    max_version = 1

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        b = self.broker
        wanted: dict[str, dict[int, list[int] | None]] = {}
        for t in request.topics:
            for p in t.partitions:
                wanted.setdefault(t.name, {})[int(p.partition_index)] = (
                    None if p.replicas is None else [int(r) for r in p.replicas])
        allow = bool(getattr(request, "allow_replication_factor_change", True))
        if not b.controller.active:
            return self._answer(ctx, request, ErrorCode.not_controller, "This is not the correct controller for this cluster.", {})
        results = await b.controller.alter_reassignments(wanted, allow)
        return self._answer(ctx, request, ErrorCode.none, None, results)

    @staticmethod
    def _answer(ctx: RequestContext, request, top: ErrorCode, message: str | None,
                results: dict[tuple[str, int], tuple[str, str | None]]):
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                why, text = results.get((t.name, int(p.partition_index)), (top.name, message))
                code = ErrorCode[why]
                parts.append(ctx.build("ReassignablePartitionResponse", partition_index=p.partition_index,
                                       error_code=code, error_message=None if code == ErrorCode.none else text))
            topics.append(ctx.build("ReassignableTopicResponse", name=t.name, partitions=tuple(parts)))
        return ctx.build("AlterPartitionReassignmentsResponse", throttle_time=NO_THROTTLE,
                         allow_replication_factor_change=bool(getattr(request, "allow_replication_factor_change", True)),
                         error_code=top, error_message=message, responses=tuple(topics))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return self._answer(ctx, request, code, message, {})


HANDLER = AlterPartitionReassignmentsHandler
