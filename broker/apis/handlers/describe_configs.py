"""DescribeConfigs (key 32): a topic's settings in force (its own, the broker's or the default;
broker/topic_config.py) and the broker's own keys, each with its config type, source, synonyms
(include_synonyms) and documentation (include_documentation), as Kafka answers them."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker import topic_config
from broker.config import KEYS
from broker.log import cleaner_settings
from broker.metadata import broker_configs
from broker.security.acl import AclOperation
from broker.admin import config_authorization
from broker.admin.config_alteration import broker_name_refusal
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.topic_config import BOOLEAN, DEFAULT_CONFIG, DOUBLE, INT, LIST, LONG, STATIC_BROKER_CONFIG, STRING, Entry

TOPIC = 2
BROKER = 4
BROKER_LOGGER = 8
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG = 2, 3
_THROTTLE_DOC = {
    broker_configs.LEADER_RATE: "Bytes/s this broker sends as a leader for the replicas its topics list in "
                                "leader.replication.throttled.replicas (KIP-73; unset: unlimited).",
    broker_configs.FOLLOWER_RATE: "Bytes/s this broker fetches as a follower for the replicas its topics list in "
                                  "follower.replication.throttled.replicas (KIP-73; unset: unlimited).",
}

# Broker keys Kafka types as LONG; other integer keys are INT.
_LONG_BROKER_KEYS = {
    "log.roll.ms", "log.retention.ms", "log.retention.bytes", "log.retention.check.interval.ms",
    "log.flush.interval.messages", "log.flush.interval.ms", "connections.max.idle.ms", "producer.id.expiration.ms",
    "log.cleaner.delete.retention.ms", "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms", "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "offsets.retention.minutes", "offsets.retention.check.interval.ms",
}
_LIST_BROKER_KEYS = {"log.cleanup.policy"}  # listeners, log.dirs, ...: Kafka types them STRING


def _broker_type(name: str, value) -> int:
    if name in _LIST_BROKER_KEYS:
        return LIST
    if name in _LONG_BROKER_KEYS:
        return LONG
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INT
    if isinstance(value, float):
        return DOUBLE
    return STRING


def broker_entries(config) -> list[Entry]:
    """Every broker key: set in the properties (STATIC_BROKER_CONFIG) or its default."""
    raw = config["__raw__"]
    out = []
    for key in KEYS:
        if key.name in broker_configs.DYNAMIC_KEYS:
            continue  # dynamic_entries reports it, with its dynamic levels
        value = raw.get(key.name, key.default)
        if value == "" and config[key.name] in (None, ""):
            value = None  # no value (Kafka answers null)
        source = STATIC_BROKER_CONFIG if key.name in raw else DEFAULT_CONFIG
        synonyms = [(key.name, value, source)] if value is not None else []
        if key.name in raw and key.default != "":
            synonyms.append((key.name, key.default, DEFAULT_CONFIG))
        out.append(Entry(key.name, value, source, _broker_type(key.name, config[key.name]), key.doc, tuple(synonyms)))
    return out


_CLEANER_TYPES = {cleaner_settings.INT: INT, cleaner_settings.LONG: LONG, cleaner_settings.DOUBLE: DOUBLE}


def dynamic_entries(configs, resource_name: str, static: dict[str, str] | None = None) -> list[Entry]:
    """The dynamic broker keys as Kafka reports them: a broker's own value (DYNAMIC_BROKER_CONFIG)
    over the cluster default (DYNAMIC_DEFAULT_BROKER_CONFIG) over its properties
    (STATIC_BROKER_CONFIG) over Kafka's default (a rate's: Long.MAX_VALUE), every level that sets
    the key a synonym; the cluster-default resource ("") reports only what it sets."""
    out = []
    own = configs.get(resource_name, {}) if resource_name else {}
    default = configs.get(broker_configs.DEFAULT_ENTITY, {})
    static = static or {}
    for key in broker_configs.DYNAMIC_KEYS:
        synonyms = []
        if key in own:
            synonyms.append((key, own[key], DYNAMIC_BROKER_CONFIG))
        if key in default:
            synonyms.append((key, default[key], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if not resource_name and not synonyms:
            continue
        cleaner_key = cleaner_settings.BY_NAME.get(key)
        if cleaner_key is None:
            value, source = synonyms[0][1:] if synonyms else (str(broker_configs.LONG_MAX), DEFAULT_CONFIG)
            out.append(Entry(key, value, source, LONG, _THROTTLE_DOC[key], tuple(synonyms)))
            continue
        if resource_name:
            if key in static:
                synonyms.append((key, static[key], STATIC_BROKER_CONFIG))
            synonyms.append((key, cleaner_key.default, DEFAULT_CONFIG))
        value, source = synonyms[0][1:]
        out.append(Entry(key, value, source, _CLEANER_TYPES[cleaner_key.type], cleaner_key.doc, tuple(synonyms)))
    return out


class DescribeConfigsHandler(Handler):
    api_key = 32
    min_version = 1
    max_version = 4

    def _entries(self, resource) -> tuple[list[Entry], bool, ErrorCode, str | None]:
        """(entries, read-only, error, message) for one requested resource."""
        b = self.broker
        if resource.resource_type == TOPIC:
            rec = b.store.image.topics.get(resource.resource_name)
            if rec is None:
                return [], False, ErrorCode.unknown_topic_or_partition, f"unknown topic {resource.resource_name!r}"
            return topic_config.describe(b.config, rec.configs), False, ErrorCode.none, None
        if resource.resource_type == BROKER:
            refused = broker_name_refusal(resource.resource_name, b.node_id, describing=True)
            if refused is not None:
                return [], True, ErrorCode.invalid_request, refused
            # Every key is read-only but the dynamic ones (metadata/broker_configs.py).
            dynamic = dynamic_entries(b.broker_configs.configs,
                                      str(b.node_id) if resource.resource_name else "",
                                      b.config["__raw__"])
            if not resource.resource_name:
                return dynamic, True, ErrorCode.none, None
            return broker_entries(b.config) + dynamic, True, ErrorCode.none, None
        return [], True, ErrorCode.invalid_request, f"resource type {resource.resource_type} is not supported"

    async def handle(self, ctx: RequestContext, request):
        with_synonyms = bool(getattr(request, "include_synonyms", False))
        with_docs = bool(getattr(request, "include_documentation", False))
        results = []
        for r in request.resources:
            refused = config_authorization.refusal(ctx.authz, AclOperation.DESCRIBE_CONFIGS, int(r.resource_type),
                                                   r.resource_name)
            entries, read_only, code, msg = ([], False, *refused) if refused else self._entries(r)
            keys = r.configuration_keys
            configs = tuple(
                ctx.build("DescribeConfigsResourceResult", name=e.name, value=e.value,
                          read_only=read_only and e.name not in broker_configs.DYNAMIC_KEYS,
                          config_source=e.source, is_default=e.source == DEFAULT_CONFIG, is_sensitive=False,
                          synonyms=tuple(ctx.build("DescribeConfigsSynonym", name=n, value=v, source=s)
                                         for n, v, s in e.synonyms) if with_synonyms else (),
                          config_type=e.type, documentation=e.doc if with_docs else None)
                for e in sorted(entries, key=lambda e: e.name) if keys is None or e.name in keys)
            results.append(ctx.build("DescribeConfigsResult", error_code=code, error_message=msg,
                                     resource_type=r.resource_type, resource_name=r.resource_name, configs=configs))
        return ctx.build("DescribeConfigsResponse", throttle_time=NO_THROTTLE, results=tuple(results))


HANDLER = DescribeConfigsHandler
