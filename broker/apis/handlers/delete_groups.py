"""DeleteGroups (API 42): remove empty groups and their offsets (NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class DeleteGroupsHandler(Handler):
    api_key = 42
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        names = list(dict.fromkeys(request.groups_names))
        allowed = [g for g in names if ctx.authz.allowed(AclOperation.DELETE, ResourceType.GROUP, g)]
        errors = await self.broker.groups.delete_groups(allowed) if allowed else {}
        errors = {g: errors.get(g, ErrorCode.group_authorization_failed) for g in names}
        results = tuple(ctx.build("DeletableGroupResult", group_id=g, error_code=errors[g]) for g in names)
        return ctx.build("DeleteGroupsResponse", throttle_time=NO_THROTTLE, results=results)


HANDLER = DeleteGroupsHandler
