"""DescribeCluster (key 60): what the Java admin client asks for the broker list: every live
broker of the cluster (endpoints of the request's listener) and the elected controller. Asked, the
operations the principal may do on the cluster (0 without DESCRIBE on it), as Kafka's AuthHelper."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import OPERATIONS_NOT_REQUESTED
from broker.metadata import cluster_view
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext

BROKERS_ENDPOINT = 1


class DescribeClusterHandler(Handler):
    api_key = 60
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        image = self.broker.store.image
        endpoint_type = getattr(request, "endpoint_type", BROKERS_ENDPOINT)
        if endpoint_type != BROKERS_ENDPOINT:
            return ctx.build("DescribeClusterResponse", throttle_time=NO_THROTTLE,
                             error_code=ErrorCode.unsupported_endpoint_type,
                             error_message="only broker endpoints are served", endpoint_type=endpoint_type,
                             cluster_id=image.cluster_id, controller_id=-1, brokers=(),
                             cluster_authorized_operations=OPERATIONS_NOT_REQUESTED)
        ops = (ctx.authz.cluster_operations() if request.include_cluster_authorized_operations
               else OPERATIONS_NOT_REQUESTED)
        brokers = tuple(ctx.build("DescribeClusterBroker", broker_id=n.node_id, host=n.host, port=n.port,
                                  rack=n.rack, is_fenced=False)
                        for n in cluster_view.live_nodes(image, cluster_view.listener_of(ctx)))
        return ctx.build("DescribeClusterResponse", throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                         error_message=None, endpoint_type=endpoint_type, cluster_id=image.cluster_id,
                         controller_id=cluster_view.controller_id(image), brokers=brokers,
                         cluster_authorized_operations=ops)


HANDLER = DescribeClusterHandler
