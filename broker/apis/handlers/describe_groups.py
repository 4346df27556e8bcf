"""DescribeGroups (API 15): state, protocol and members (with metadata and assignment when Stable).

Needs DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED for it). Asked (v3+), a group
described without error carries the operations the principal may do on it, as Kafka computes them.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import OPERATIONS_NOT_REQUESTED, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class DescribeGroupsHandler(Handler):
    api_key = 15
    min_version = 0
    max_version = 6

    async def handle(self, ctx: RequestContext, request):
        with_operations = getattr(request, "include_authorized_operations", False)
        described = []
        for group_id in request.groups:
            if not ctx.authz.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
                described.append(ctx.build("DescribedGroup", error_code=ErrorCode.group_authorization_failed,
                                           error_message=None, group_id=group_id, group_state="", protocol_type="",
                                           protocol_data="", members=(),
                                           authorized_operations=OPERATIONS_NOT_REQUESTED))
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
            ops = (ctx.authz.operations(ResourceType.GROUP, group_id) if with_operations and error == ErrorCode.none
                   else OPERATIONS_NOT_REQUESTED)
            described.append(ctx.build("DescribedGroup", error_code=error, error_message=message, group_id=group_id,
                                       group_state=s.state, protocol_type=s.protocol_type,
                                       protocol_data=s.protocol_data, members=members,
                                       authorized_operations=ops))
        return ctx.build("DescribeGroupsResponse", throttle_time=NO_THROTTLE, groups=tuple(described))


HANDLER = DescribeGroupsHandler
