"""DescribeGroups (API 15): state, protocol and members (with metadata and assignment when Stable)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext

# Kafka's "operations not requested" marker, and READ|DELETE|DESCRIBE when asked (no authorizer).
NOT_REQUESTED = -(2**31)
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


class DescribeGroupsHandler(Handler):
    api_key = 15
    min_version = 0
    max_version = 6

    async def handle(self, ctx: RequestContext, request):
        ops = GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False) else NOT_REQUESTED
        described = []
        for group_id in request.groups:
            if not ctx.authz.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                described.append(ctx.build("DescribedGroup", error_code=ErrorCode.group_authorization_failed,
                                           error_message=None, group_id=group_id, group_state="", protocol_type="",
                                           protocol_data="", members=(), authorized_operations=NOT_REQUESTED))
                continue
            s = self.broker.groups.describe_group(group_id)
            error, message = s.error, None
            if error == ErrorCode.group_id_not_found:
                if ctx.api_version >= 6:
                    message = f"Group {group_id} not found."
                else:
                    error = ErrorCode.none  # before v6 an unknown group is described as Dead
            members = tuple(ctx.build("DescribedGroupMember", member_id=m.member_id,
                                      group_instance_id=m.group_instance_id, client_id=m.client_id,
                                      client_host=m.client_host, member_metadata=m.metadata,
                                      member_assignment=m.assignment) for m in s.members)
            described.append(ctx.build("DescribedGroup", error_code=error, error_message=message, group_id=group_id,
                                       group_state=s.state, protocol_type=s.protocol_type,
                                       protocol_data=s.protocol_data, members=members,
                                       authorized_operations=ops))
        return ctx.build("DescribeGroupsResponse", throttle_time=NO_THROTTLE, groups=tuple(described))


HANDLER = DescribeGroupsHandler
