"""JoinGroup (API 11): hand the request to the group coordinator and wait for the rebalance."""

from __future__ import annotations

import datetime

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, require

_MS = datetime.timedelta(milliseconds=1)


def client_host(ctx: RequestContext) -> str:
    """Kafka shows the client's address as `/host`."""
    peer = getattr(ctx.connection, "peer", "") or ""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return "/" + host


class JoinGroupHandler(Handler):
    api_key = 11
    min_version = 0
    max_version = 9

    async def handle(self, ctx: RequestContext, request):
        require(ctx, AclOperation.READ, ResourceType.GROUP, request.group_id, ErrorCode.group_authorization_failed)
        rebalance_timeout = getattr(request, "rebalance_timeout", None)
        result = await self.broker.groups.join_group(
            group_id=request.group_id,
            member_id=request.member_id,
            group_instance_id=getattr(request, "group_instance_id", None),
            # KIP-394: from v4 a member without an id first gets one (MEMBER_ID_REQUIRED).
            require_known_member_id=ctx.api_version >= 4,
            client_id=ctx.client_id,
            client_host=client_host(ctx),
            rebalance_timeout_ms=int(rebalance_timeout / _MS) if rebalance_timeout is not None else -1,
            session_timeout_ms=int(request.session_timeout / _MS),
            protocol_type=request.protocol_type,
            protocols=[(p.name, p.metadata) for p in request.protocols],
        )
        members = tuple(ctx.build("JoinGroupResponseMember", member_id=m.member_id,
                                  group_instance_id=m.group_instance_id, metadata=m.metadata)
                        for m in result.members)
        protocol_name = result.protocol_name
        if protocol_name is None and ctx.api_version < 7:
            protocol_name = ""  # not nullable before v7
        return ctx.build(
            "JoinGroupResponse", throttle_time=NO_THROTTLE, error_code=result.error,
            generation_id=result.generation_id, protocol_type=result.protocol_type, protocol_name=protocol_name,
            leader=result.leader_id, skip_assignment=result.skip_assignment, member_id=result.member_id,
            members=members)


HANDLER = JoinGroupHandler
