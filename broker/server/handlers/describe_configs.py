"""DescribeConfigs (key 32): topic configs (defaults plus the topic's own) and broker configs."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.config import KEYS, topic_config_entries
from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
SOURCE_TOPIC = 1
SOURCE_STATIC_BROKER = 4
SOURCE_DEFAULT = 5


class DescribeConfigsHandler(Handler):
    api_key = 32
    min_version = 1
    max_version = 4

    def _entries(self, resource) -> tuple[dict[str, tuple[str, int]], ErrorCode, str | None]:
        b = self.broker
        if resource.resource_type == TOPIC:
            rec = b.store.image.topics.get(resource.resource_name)
            if rec is None:
                return {}, ErrorCode.unknown_topic_or_partition, f"unknown topic {resource.resource_name!r}"
            entries = {k: (v, SOURCE_DEFAULT) for k, v in topic_config_entries(b.config).items()}
            entries.update({k: (v, SOURCE_TOPIC) for k, v in rec.configs.items()})
            return entries, ErrorCode.none, None
        if resource.resource_type == BROKER:
            if resource.resource_name not in ("", str(b.node_id)):
                return {}, ErrorCode.invalid_request, f"this is broker {b.node_id}, not {resource.resource_name}"
            raw = b.config["__raw__"]
            entries = {}
            for key in KEYS:
                value = raw.get(key.name, key.default)
                entries[key.name] = (value, SOURCE_STATIC_BROKER if key.name in raw else SOURCE_DEFAULT)
            return entries, ErrorCode.none, None
        return {}, ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported"

    async def handle(self, ctx: RequestContext, request):
        results = []
        for r in request.resources:
            entries, code, msg = self._entries(r)
            keys = r.configuration_keys
            configs = tuple(
                ctx.build("DescribeConfigsResourceResult", name=k, value=v, read_only=src != SOURCE_TOPIC,
                          config_source=src, is_default=src == SOURCE_DEFAULT, is_sensitive=False, synonyms=(),
                          config_type=0, documentation=None)
                for k, (v, src) in sorted(entries.items()) if keys is None or k in keys)
            results.append(ctx.build("DescribeConfigsResult", error_code=code, error_message=msg,
                                     resource_type=r.resource_type, resource_name=r.resource_name, configs=configs))
        return ctx.build("DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=tuple(results))


HANDLER = DescribeConfigsHandler
