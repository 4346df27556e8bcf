"""ListPartitionReassignments (key 46, KIP-455): the reassignments in progress
(`kafka-reassign-partitions.sh --verify`, Admin.listPartitionReassignments), read from the
partition records (controller/reassignment.py). Served by the controller, like
AlterPartitionReassignments; another broker answers NOT_CONTROLLER. As Kafka's controller, topics
and partitions that do not exist, or are not being reassigned, are left out of the answer. It needs DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED,
checked before NOT_CONTROLLER as Kafka's controller does).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.controller import reassignment
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class ListPartitionReassignmentsHandler(Handler):
    api_key = 46
    min_version = 0
    max_version = 0

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        b = self.broker
        if not b.controller.active:
            return self.error_response(ctx, request, ErrorCode.not_controller,
                                       "This is not the correct controller for this cluster.")
        topics = b.store.image.topics
        if request.topics is None:
            wanted = [(name, range(len(t.assignment or ()))) for name, t in sorted(topics.items())]
        else:
            wanted = [(t.name, [int(i) for i in t.partition_indexes]) for t in request.topics]
        out = []
        for name, indexes in wanted:
            record = topics.get(name)
            assignment = (record.assignment or ()) if record is not None else ()
            parts = [ctx.build("OngoingPartitionReassignment", partition_index=i, replicas=tuple(assignment[i].replicas),
                               adding_replicas=tuple(assignment[i].adding), removing_replicas=tuple(assignment[i].removing))
                     for i in indexes if 0 <= i < len(assignment) and reassignment.in_progress(assignment[i])]
            if parts:
                out.append(ctx.build("OngoingTopicReassignment", name=name, partitions=tuple(parts)))
        return ctx.build("ListPartitionReassignmentsResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         error_message=None, topics=tuple(out))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Kafka's ListPartitionReassignmentsRequest.getErrorResponse: the asked partitions, no replicas."""
        topics = tuple(ctx.build("OngoingTopicReassignment", name=t.name, partitions=tuple(
            ctx.build("OngoingPartitionReassignment", partition_index=i, replicas=(), adding_replicas=(),
                      removing_replicas=()) for i in t.partition_indexes)) for t in request.topics or ())
        return ctx.build("ListPartitionReassignmentsResponse", throttle_time=NO_THROTTLE, error_code=code,
                         error_message=message, topics=topics)


HANDLER = ListPartitionReassignmentsHandler
