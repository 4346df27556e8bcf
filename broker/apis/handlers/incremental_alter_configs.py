"""IncrementalAlterConfigs (key 44): SET, DELETE, APPEND or SUBTRACT single topic config keys,
as `kafka-configs.sh --alter` and AdminClient.incrementalAlterConfigs send them; see
broker/admin/config_alteration.py."""

from __future__ import annotations

from broker import topic_config
from broker.admin import config_alteration
from broker.apis.handlers.alter_configs import refused_before_alteration
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext


class IncrementalAlterConfigsHandler(Handler):
    api_key = 44
    min_version = 0
    max_version = 1

    async def handle(self, ctx: RequestContext, request):
        config = self.broker.config
        out = []
        for r in request.resources:
            entries = [(c.name, int(c.config_operation), c.value) for c in r.configs]
            refused = refused_before_alteration(ctx, r, self.broker.node_id)
            if refused is not None:
                out.append(refused)
                continue
            if config_alteration.deletes_unset_broker_keys(int(r.resource_type), entries):
                outcome = config_alteration.OK  # nothing to delete (reassignment tools clear throttles)
            else:
                outcome = await config_alteration.alter(
                    self.broker.topics, int(r.resource_type), r.resource_name,
                    lambda entries=entries: config_alteration.incremental(
                        entries, lambda current: topic_config.in_force(config, current)),
                    bool(request.validate_only),
                broker_store=self.broker.broker_configs)
            out.append(ctx.build("AlterConfigsResourceResponse", error_code=outcome.error_code,
                                 error_message=outcome.error_message, resource_type=r.resource_type,
                                 resource_name=r.resource_name))
        return ctx.build("IncrementalAlterConfigsResponse", throttle_time=NO_THROTTLE, responses=tuple(out))


HANDLER = IncrementalAlterConfigsHandler
