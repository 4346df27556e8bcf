"""SyncGroup (API 14): the leader's assignments in, each member's assignment out (bytes as-is)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class SyncGroupHandler(Handler):
    api_key = 14
    min_version = 0
    max_version = 5

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        result = await self.broker.groups.sync_group(
            group_id=request.group_id,
            generation_id=request.generation_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            protocol_type=getattr(request, "protocol_type", None),
            protocol_name=getattr(request, "protocol_name", None),
            assignments={a.member_id: a.assignment for a in request.assignments},
        )
        return ctx.build("SyncGroupResponse", throttle_time=NO_THROTTLE, error_code=result.error,
                         protocol_type=result.protocol_type, protocol_name=result.protocol_name,
                         assignment=result.assignment)


HANDLER = SyncGroupHandler
