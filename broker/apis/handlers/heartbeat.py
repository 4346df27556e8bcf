"""Heartbeat (API 12): keeps a member's session alive and tells it about rebalances."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class HeartbeatHandler(Handler):
    api_key = 12
    min_version = 0
    max_version = 4

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        error = self.broker.groups.heartbeat(
            group_id=request.group_id, member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None), generation_id=request.generation_id)
        return ctx.build("HeartbeatResponse", throttle_time=NO_THROTTLE, error_code=error)


HANDLER = HeartbeatHandler
