"""DescribeCluster (key 60): what the Java admin client asks for the broker list."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext

BROKERS_ENDPOINT = 1


class DescribeClusterHandler(Handler):
    api_key = 60
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        b = self.broker
        endpoint_type = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
        if endpoint_type != BROKERS_ENDPOINT:
            return ctx.build("DescribeClusterResponse", throttle_time=NO_THROTTLE,
                             error_code=ErrorCode.unsupported_endpoint_type,
                             error_message="only broker endpoints are served", endpoint_type=endpoint_type,
                             cluster_id=b.cluster_id, controller_id=-1, brokers=(),
                             cluster_authorized_operations=-2147483648)
        adv = b.advertised
        brokers = (ctx.build("DescribeClusterBroker", broker_id=b.node_id, host=adv.host, port=adv.port, rack=None,
                             is_fenced=False),)
        return ctx.build("DescribeClusterResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         error_message=None, endpoint_type=endpoint_type, cluster_id=b.cluster_id,
                         controller_id=b.node_id, brokers=brokers, cluster_authorized_operations=-2147483648)


HANDLER = DescribeClusterHandler
