"""ListConfigResources (key 74, v0-1; KIP-1142, new in Kafka 4.1; v0 was ListClientMetricsResources):
the resources that have configs, for `kafka-configs.sh --describe --all` style listings and Admin
listConfigResources.

v1, as Kafka's KafkaApis: TOPIC (every topic), BROKER and BROKER_LOGGER (every live broker's id),
GROUP (groups with dynamic group configs) and CLIENT_METRICS (KIP-714 subscriptions); no types
asked means all of them; another type is UNSUPPORTED_VERSION. We have neither group configs nor
client-metrics subscriptions, so those two are always empty; v0 (client metrics only) answers an
empty list. Both versions need DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED);
the topics listed are then all of them, as in Kafka 4.1.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata import cluster_view
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED = (TOPIC, BROKER, BROKER_LOGGER, GROUP, CLIENT_METRICS)


class ListConfigResourcesHandler(Handler):
    api_key = 74
    min_version = 0
    max_version = 1

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME,
                ErrorCode.cluster_authorization_failed)
        if ctx.api_version == 0:
            return self._answer(ctx, ErrorCode.none, [])
        wanted = [int(t) for t in request.resource_types] or list(SUPPORTED)
        if any(t not in SUPPORTED for t in wanted):
            return self._answer(ctx, ErrorCode.unsupported_version, [])
        image = self.broker.store.image
        brokers = [str(n.node_id) for n in cluster_view.live_nodes(image, cluster_view.listener_of(ctx))]
        resources: list[tuple[str, int]] = []
        for t in dict.fromkeys(wanted):
            if t == TOPIC:
                resources += [(name, TOPIC) for name in sorted(image.topics)]
            elif t in (BROKER, BROKER_LOGGER):
                resources += [(b, t) for b in brokers]
        return self._answer(ctx, ErrorCode.none, resources)

    @staticmethod
    def _answer(ctx: RequestContext, code: ErrorCode, resources: list[tuple[str, int]]):
        return ctx.build("ListConfigResourcesResponse", throttle_time=NO_THROTTLE, error_code=code,
                         config_resources=tuple(ctx.build("ConfigResource", resource_name=name, resource_type=t)
                                                for name, t in resources))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        return self._answer(ctx, code, [])


HANDLER = ListConfigResourcesHandler
