"""ListGroups (API 16): the groups this broker coordinates, filtered by state (v4+) and type (v5+)."""

from __future__ import annotations

from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext

GROUP_TYPE = "classic"


class ListGroupsHandler(Handler):
    api_key = 16
    min_version = 0
    max_version = 5

    async def handle(self, ctx: RequestContext, request):
        error, groups = self.broker.groups.list_groups()
        states = {s.lower() for s in getattr(request, "states_filter", ()) or ()}
        types = {t.lower() for t in getattr(request, "types_filter", ()) or ()}
        if types and GROUP_TYPE not in types:
            groups = []
        authz = ctx.authz
        if authz.enabled and not authz.quietly(AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            # Kafka: DESCRIBE on the cluster lists every group, else those the principal may describe.
            groups = [g for g in groups if authz.quietly(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)]
        listed = tuple(ctx.build("ListedGroup", group_id=g.group_id, protocol_type=g.protocol_type,
                                 group_state=g.state, group_type=GROUP_TYPE)
                       for g in groups if not states or g.state.lower() in states)
        return ctx.build("ListGroupsResponse", throttle_time=NO_THROTTLE, error_code=error, groups=listed)


HANDLER = ListGroupsHandler
