"""LeaveGroup (API 13): one member (v0-v2) or a batch of members (v3+, KIP-345) leave."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.coordinator.group.coordinator import LeaveMember
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require


class LeaveGroupHandler(Handler):
    api_key = 13
    min_version = 0
    max_version = 5

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        if ctx.api_version < 3:
            top, errors = self.broker.groups.leave_group(request.group_id, [LeaveMember(request.member_id, None)])
            error = top if top != ErrorCode.none or not errors else errors[0]
            return ctx.build("LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=error)
        leaving = [LeaveMember(m.member_id, m.group_instance_id) for m in request.members]
        top, errors = self.broker.groups.leave_group(request.group_id, leaving)
        members = tuple(ctx.build("MemberResponse", member_id=lm.member_id, group_instance_id=lm.group_instance_id,
                                  error_code=err) for lm, err in zip(leaving, errors))
        if top == ErrorCode.none:
            # As Kafka: the top-level code is the first member error when there is one.
            top = next((e for e in errors if e != ErrorCode.none), ErrorCode.none)
        return ctx.build("LeaveGroupResponse", throttle_time=NO_THROTTLE, error_code=top, members=members)


HANDLER = LeaveGroupHandler
