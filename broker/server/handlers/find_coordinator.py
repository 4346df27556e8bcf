"""FindCoordinator (API 10): this broker coordinates every group; transactions come later.

v0-v3 ask for one key, v4+ for a batch (`coordinator_keys`, KIP-699).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1


class FindCoordinatorHandler(Handler):
    api_key = 10
    min_version = 0
    max_version = 6

    def _answer(self, ctx: RequestContext, key_type: int) -> dict:
        if key_type == KEY_TYPE_GROUP:
            adv = self._listener(ctx)
            return dict(error_code=ErrorCode.none, error_message=None, node_id=self.broker.node_id,
                        host=adv.host, port=adv.port)
        if key_type == KEY_TYPE_TRANSACTION:
            message = "no transaction coordinator on this broker yet"
            code = ErrorCode.coordinator_not_available
        else:
            message = f"unknown coordinator key type {key_type}"
            code = ErrorCode.invalid_request
        return dict(error_code=code, error_message=message, node_id=-1, host="", port=-1)

    def _listener(self, ctx: RequestContext):
        """The advertised listener of the listener the request came in on (as Kafka does)."""
        name = getattr(ctx.connection, "listener_name", None)
        for adv in self.broker.config.advertised_listeners:
            if adv.name == name and adv.port != 0:
                return adv
        return self.broker.advertised

    async def handle(self, ctx: RequestContext, request):
        if ctx.api_version < 4:
            key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
            return ctx.build("FindCoordinatorResponse", throttle_time=NO_THROTTLE, **self._answer(ctx, key_type))
        coordinators = tuple(ctx.build("Coordinator", key=key, **self._answer(ctx, request.key_type))
                             for key in request.coordinator_keys)
        return ctx.build("FindCoordinatorResponse", throttle_time=NO_THROTTLE, coordinators=coordinators)


HANDLER = FindCoordinatorHandler
