"""AlterConfigs (key 33): replace a topic's own configs with the given set (keys left out return
to the broker's value), as Kafka's legacy API does; see broker/admin/config_alteration.py."""

from __future__ import annotations

from broker.admin import config_alteration, config_authorization
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


def refused_before_alteration(ctx: RequestContext, resource, node_id: int):
    """The AlterConfigsResourceResponse refusing `resource` before anything changes (both alter APIs
    answer alike), as Kafka checks in this order: a BROKER name that is not this broker's id or
    empty, then the ACL; None when neither refuses."""
    named = config_alteration.refused_broker_name(int(resource.resource_type), resource.resource_name, node_id)
    if named is None:
        return config_authorization.refused_alteration(ctx, resource)
    return ctx.build("AlterConfigsResourceResponse", error_code=named.error_code, error_message=named.error_message,
                     resource_type=resource.resource_type, resource_name=resource.resource_name)


class AlterConfigsHandler(Handler):
    api_key = 33
    min_version = 0
    max_version = 2

    async def handle(self, ctx: RequestContext, request):
        out = []
        for r in request.resources:
            entries = [(c.name, c.value) for c in r.configs]
            refused = refused_before_alteration(ctx, r, self.broker.node_id)
            if refused is not None:
                out.append(refused)
                continue
            outcome = await config_alteration.alter(
                self.broker.topics, int(r.resource_type), r.resource_name,
                lambda entries=entries: config_alteration.replace_all(entries), bool(request.validate_only),
                broker_store=self.broker.broker_configs)
            out.append(ctx.build("AlterConfigsResourceResponse", error_code=outcome.error_code,
                                 error_message=outcome.error_message, resource_type=r.resource_type,
                                 resource_name=r.resource_name))
        return ctx.build("AlterConfigsResponse", throttle_time=NO_THROTTLE, responses=tuple(out))


HANDLER = AlterConfigsHandler
