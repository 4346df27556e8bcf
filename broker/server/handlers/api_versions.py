"""ApiVersions (key 18): which APIs and versions this broker serves. Clients ask first."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext


class ApiVersionsHandler(Handler):
    api_key = 18
    min_version = 0
    max_version = 4

    async def handle(self, ctx: RequestContext, request):
        supported = self.broker.dispatcher.supported
        keys = tuple(ctx.build("ApiVersion", api_key=k, min_version=lo, max_version=hi)
                     for k, (lo, hi) in sorted(supported.items()))
        return ctx.build("ApiVersionsResponse", error_code=ErrorCode.none, api_keys=keys, throttle_time=NO_THROTTLE)


HANDLER = ApiVersionsHandler
