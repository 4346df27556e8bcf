"""ElectLeaders (key 43, KIP-183/460): a preferred or unclean leader election an admin asks for
(`kafka-leader-election`, Admin.electLeaders). Served by the controller; any other broker answers
NOT_CONTROLLER, and the client retries against the controller Metadata names.

Per partition: NONE once the new leader is written, ELECTION_NOT_NEEDED (the preferred replica
already leads / the leader is alive), PREFERRED_LEADER_NOT_AVAILABLE (not live or not in the ISR),
ELIGIBLE_LEADERS_NOT_AVAILABLE (unclean: no live replica), UNKNOWN_TOPIC_OR_PARTITION. A request
without partitions means every partition; then those needing no election are left out.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.controller.planner import PREFERRED
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class ElectLeadersHandler(Handler):
    api_key = 43
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME, ErrorCode.cluster_authorization_failed)
        b = self.broker
        election_type = int(getattr(request, "election_type", PREFERRED))
        everything = request.topic_partitions is None
        if everything:
            wanted = {name: list(range(t.partitions)) for name, t in b.store.image.topics.items()}
        else:
            wanted = {}
            for tp in request.topic_partitions:
                wanted.setdefault(tp.topic, []).extend(int(p) for p in tp.partitions)
        if not b.controller.active:
            return self._answer(ctx, ErrorCode.not_controller, {
                (name, i): "not_controller" for name, idx in wanted.items() for i in idx})
        results = await b.controller.elect_leaders(wanted, election_type)
        if everything:
            results = {k: v for k, v in results.items() if v != "election_not_needed"}
        return self._answer(ctx, ErrorCode.none, results)

    @staticmethod
    def _answer(ctx: RequestContext, top: ErrorCode, results: dict[tuple[str, int], str]):
        by_topic: dict[str, list] = {}
        for (name, i), why in results.items():
            code = ErrorCode[why]
            by_topic.setdefault(name, []).append(ctx.build(
                "PartitionResult", partition_id=i, error_code=code,
                error_message=None if code == ErrorCode.none else why.replace("_", " ")))
        return ctx.build("ElectLeadersResponse", throttle_time=NO_THROTTLE, error_code=top,
                         replica_election_results=tuple(
                             ctx.build("ReplicaElectionResult", topic=name, partition_result=tuple(parts))
                             for name, parts in by_topic.items()))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        wanted = {} if request.topic_partitions is None else {
            (tp.topic, int(p)): code.name for tp in request.topic_partitions for p in tp.partitions}
        return self._answer(ctx, code, wanted)


HANDLER = ElectLeadersHandler
