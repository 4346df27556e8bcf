"""CreateTopics (key 19) from any broker: a create-if-absent write to the cluster metadata per
topic, then one wait (bounded by the request's timeout) until the controller's assignments of all
of them reach this broker's image. A timeout of 0 or less answers without waiting, as Kafka does."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker import topic_config
from broker.metadata.store import NO_TOPIC_ID, TopicExists, TopicRecord
from broker.security.acl import CLUSTER_NAME, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.admin.topics import TopicError



@dataclass
class _Outcome:
    """One requested topic's result while the request is being answered."""

    topic: Any
    configs: dict[str, str]
    code: ErrorCode
    message: str | None
    record: TopicRecord | None
    partitions: int
    replication_factor: int
    requested_replicas: tuple[tuple[int, ...], ...] | None = None


def request_timeout(request) -> float | None:
    """Seconds to wait for the controller, from the request's timeout (None: do not wait)."""
    seconds = request.timeout.total_seconds()
    return seconds if seconds > 0 else None


class CreateTopicsHandler(Handler):
    api_key = 19
    min_version = 2
    max_version = 7

    async def handle(self, ctx: RequestContext, request):
        b = self.broker
        outcomes = []
        seen: set[str] = set()
        authz = ctx.authz
        # Kafka: CREATE on the cluster, or on each topic.
        on_cluster = authz.quietly(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)

        def may_create(name: str) -> bool:
            return on_cluster or authz.allowed(AclOperation.CREATE, ResourceType.TOPIC, name)

        for t in request.topics:
            configs = {c.name: c.value for c in t.configs}
            o = _Outcome(t, configs, ErrorCode.none, None, None, -1, -1)
            try:
                if t.name in seen:
                    raise TopicError(ErrorCode.invalid_request, f"topic {t.name!r} appears twice in the request")
                seen.add(t.name)
                if not may_create(t.name):
                    raise TopicError(ErrorCode.topic_authorization_failed, "Authorization failed.")
                if t.assignments:  # placed by hand (kafka-topics.sh --replica-assignment)
                    o.requested_replicas = b.topics.check_create_manual(
                        t.name, [(a.partition_index, a.broker_ids) for a in t.assignments],
                        t.num_partitions, t.replication_factor, configs)
                    o.partitions, o.replication_factor = len(o.requested_replicas), len(o.requested_replicas[0])
                else:
                    o.partitions, o.replication_factor = b.topics.check_create(
                        t.name, t.num_partitions, t.replication_factor, configs)
            except TopicError as e:
                o.code, o.message = e.code, e.message
            outcomes.append(o)
        if not request.validate_only:
            # One create-if-absent write per topic, all in flight together.
            valid = [o for o in outcomes if o.code == ErrorCode.none]
            made = await asyncio.gather(*(b.topics.create(o.topic.name, o.partitions, o.replication_factor, o.configs,
                                                          requested_replicas=o.requested_replicas)
                                          for o in valid), return_exceptions=True)
            for o, m in zip(valid, made):
                if isinstance(m, TopicError):
                    o.code, o.message = m.code, m.message
                elif isinstance(m, TopicExists):
                    o.code, o.message = ErrorCode.topic_already_exists, f"topic {o.topic.name!r} already exists"
                elif isinstance(m, BaseException):
                    raise m
                else:
                    o.record = m
        timeout_s = request_timeout(request)
        created = [o for o in outcomes if o.record is not None]
        if timeout_s is not None and created:
            # The controller assigns them one after another; wait for all at once.
            waited = await asyncio.gather(
                *(b.topics.await_created(o.topic.name, timeout_s, o.record) for o in created), return_exceptions=True)
            for o, w in zip(created, waited):
                if isinstance(w, TopicError):
                    o.code, o.message = w.code, w.message
                elif isinstance(w, BaseException):
                    raise w
                else:
                    o.record = w
        results = []
        # As Kafka: the configs in force are shown only to a caller who may DESCRIBE_CONFIGS the
        # topic; others get TOPIC_AUTHORIZATION_FAILED in topic_config_error_code and none.
        describable = authz.filter(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC,
                                   [o.topic.name for o in outcomes if o.code == ErrorCode.none])
        for o in outcomes:
            t, configs, code, msg, record, partitions, rf = (o.topic, o.configs, o.code, o.message, o.record,
                                                             o.partitions, o.replication_factor)
            config_code = ErrorCode.none
            if code == ErrorCode.none and t.name not in describable:
                config_code = ErrorCode.topic_authorization_failed
            cfgs = tuple(ctx.build("CreatableTopicConfigs", name=e.name, value=e.value, read_only=False,
                                   config_source=e.source, is_sensitive=False)
                         for e in topic_config.describe(b.config, configs)
                         ) if code == config_code == ErrorCode.none and ctx.has("CreatableTopicConfigs") else ()
            results.append(ctx.build(
                "CreatableTopicResult", name=t.name, topic_id=record.topic_id if record else NO_TOPIC_ID,
                error_code=code, error_message=msg, topic_config_error_code=config_code,
                num_partitions=partitions if code == ErrorCode.none else -1,
                replication_factor=rf if code == ErrorCode.none else -1, configs=cfgs))
        return ctx.build("CreateTopicsResponse", throttle_time=NO_THROTTLE, topics=tuple(results))


HANDLER = CreateTopicsHandler
