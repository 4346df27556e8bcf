"""DeleteGroups (API 42): remove empty groups and their offsets (NON_EMPTY_GROUP otherwise)."""

from __future__ import annotations

from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext


class DeleteGroupsHandler(Handler):
    api_key = 42
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        names = list(dict.fromkeys(request.groups_names))
        errors = await self.broker.groups.delete_groups(names)
        results = tuple(ctx.build("DeletableGroupResult", group_id=g, error_code=errors[g]) for g in names)
        return ctx.build("DeleteGroupsResponse", throttle_time=NO_THROTTLE, results=results)


HANDLER = DeleteGroupsHandler
