"""Metadata (key 3): the whole cluster as this broker's image has it.

All live brokers with their endpoints for the listener the request came in on, the controller
elected through the store, and each partition's leader, replicas, ISR and leader epoch. A topic
the controller has not assigned yet, and a partition without a live leader, answer
LEADER_NOT_AVAILABLE (clients retry), as Kafka does.

Unknown topics are created here when auto.create.topics.enable is on and the client allows it
(v4+ asks explicitly), as Kafka does; the answer for them is LEADER_NOT_AVAILABLE until the
controller has assigned them.

Asked for (v8+), each topic described (not those refused) carries the operations the principal
may do on it, and (v8-10) the cluster's (0 without DESCRIBE on the cluster), as Kafka computes them.
"""

from __future__ import annotations

import struct

from kio.schema.errors import ErrorCode

from broker.controller.assignment import NO_LEADER
from broker.metadata.store import NO_TOPIC_ID
from broker.protocol.response import Response
from broker.protocol import codec
from broker.metadata import cluster_view
from broker.security.acl import CLUSTER_NAME, OPERATIONS_NOT_REQUESTED, AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, RequestRefused
from broker.admin.topics import TopicError


FIRST_THROTTLE_VERSION = 3
_THROTTLE = struct.Struct(">i")
MAX_CACHED_ANSWERS = 64  # all-topics answers kept per image (one per version, listener and principal)


class MetadataHandler(Handler):
    api_key = 3
    min_version = 0
    max_version = 13  # v13 (KIP-1102) adds a top-level error code: NONE unless the whole request failed

    def __init__(self, broker) -> None:
        super().__init__(broker)
        # The encoded answer to "all topics" per (version, listener), for one image: with many
        # topics, building and encoding it is most of the request's cost, and it only changes
        # with the image.
        self._all_topics_image = None
        self._all_topics: dict[tuple[int, str | None], bytes] = {}

    async def handle(self, ctx: RequestContext, request):
        all_topics = request.topics is None or (ctx.api_version == 0 and not request.topics)
        if not all_topics:
            return await self.answer(ctx, request)
        image = self.broker.store.image
        if image is not self._all_topics_image:
            self._all_topics_image, self._all_topics = image, {}
        key = (ctx.api_version, cluster_view.listener_of(ctx), _wants_topic_operations(request),
               _wants_cluster_operations(request))
        if ctx.authz.enabled:  # what a principal may see or do: its own answer, until the ACLs change
            key += (ctx.authz.principal, ctx.authz.host, ctx.authz.authorizer.version)
            if len(self._all_topics) >= MAX_CACHED_ANSWERS:
                self._all_topics.clear()
        body = self._all_topics.get(key)
        if body is None:
            response = await self.answer(ctx, request)
            if self.broker.store.image is not image:
                return response  # changed meanwhile: answer, but do not cache
            body = self._all_topics[key] = codec.encode_body(self.api_key, ctx.api_version, response)
        throttle_ms = self.broker.quotas.request_throttle_ms(ctx)  # KIP-124: the cached body says 0
        if throttle_ms > 0 and ctx.api_version >= FIRST_THROTTLE_VERSION:
            body = _THROTTLE.pack(throttle_ms) + body[_THROTTLE.size:]  # throttle_time_ms leads the body
        return Response([codec.frame_response(ctx.header, body)])

    async def answer(self, ctx: RequestContext, request):
        b = self.broker
        image = b.store.image
        listener = cluster_view.listener_of(ctx)
        nodes = cluster_view.live_nodes(image, listener)
        brokers = tuple(ctx.build("MetadataResponseBroker", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
                        for n in nodes)
        authz = ctx.authz
        if request.topics is None or (ctx.api_version == 0 and not request.topics):
            # All topics: those the principal may not describe are left out, not reported.
            wanted = [(name, None) for name in sorted(image.topics)
                      if authz.quietly(AclOperation.DESCRIBE, ResourceType.TOPIC, name)]
        else:
            wanted = [(t.name, getattr(t, "topic_id", None)) for t in request.topics]
            if ctx.api_version < 12 and any(n is None or i not in (None, NO_TOPIC_ID) for n, i in wanted):
                raise RequestRefused(ErrorCode.invalid_request,
                                     f"Metadata v{ctx.api_version} takes topic names, not topic ids (v12+)")
        allow_auto = getattr(request, "allow_auto_topic_creation", True) and b.config["auto.create.topics.enable"]
        with_operations = _wants_topic_operations(request)

        def ops(name: str | None) -> int:
            if with_operations and name is not None:
                return authz.operations(ResourceType.TOPIC, name)
            return OPERATIONS_NOT_REQUESTED

        topics = []
        for name, topic_id in wanted:
            record = image.topics.get(name) if name is not None else (
                image.topic_by_id(topic_id) if topic_id not in (None, NO_TOPIC_ID) else None)
            error = ErrorCode.none
            if authz.enabled and not self.may_see(authz, name, record, allow_auto):
                # Kafka discloses nothing, not even whether the topic exists (a topic id: not its name).
                topics.append(ctx.build("MetadataResponseTopic", error_code=ErrorCode.topic_authorization_failed,
                                        name=name, topic_id=topic_id or NO_TOPIC_ID, is_internal=False,
                                        partitions=()))
                continue
            if record is None and name is not None and allow_auto:
                try:
                    record = await b.topics.create(name)
                    error = ErrorCode.leader_not_available
                except TopicError as e:
                    error = e.code
                    if e.code == ErrorCode.not_controller:
                        error = ErrorCode.leader_not_available  # metadata store unreachable: retry later
                    if e.code == ErrorCode.topic_already_exists:
                        record, error = b.store.image.topics.get(name), ErrorCode.leader_not_available
            if record is None:
                if error == ErrorCode.none:
                    error = ErrorCode.unknown_topic_or_partition if name is not None else ErrorCode.unknown_topic_id
                topics.append(ctx.build("MetadataResponseTopic", error_code=error, name=name,
                                        topic_id=topic_id or NO_TOPIC_ID, is_internal=False, partitions=(),
                                        topic_authorized_operations=ops(name)))
                continue
            if record.assignment is None:
                topics.append(ctx.build("MetadataResponseTopic", error_code=ErrorCode.leader_not_available,
                                        name=record.name, topic_id=record.topic_id,
                                        is_internal=record.is_internal, partitions=(),
                                        topic_authorized_operations=ops(record.name)))
                continue
            live = image.brokers
            partitions = tuple(
                ctx.build("MetadataResponsePartition",
                          error_code=ErrorCode.none if s.leader != NO_LEADER else ErrorCode.leader_not_available,
                          partition_index=i, leader_id=s.leader, leader_epoch=s.leader_epoch,
                          replica_nodes=tuple(s.replicas), isr_nodes=tuple(s.isr),
                          offline_replicas=tuple(r for r in s.replicas if r not in live))
                for i, s in enumerate(record.assignment[:record.partitions]))
            topics.append(ctx.build("MetadataResponseTopic", error_code=ErrorCode.none, name=record.name,
                                    topic_id=record.topic_id, is_internal=record.is_internal,
                                    partitions=partitions, topic_authorized_operations=ops(record.name)))
        return ctx.build("MetadataResponse", throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=image.cluster_id,
                         controller_id=cluster_view.controller_id(image), topics=tuple(topics),
                         error_code=ErrorCode.none,
                         cluster_authorized_operations=authz.cluster_operations()
                         if _wants_cluster_operations(request) else OPERATIONS_NOT_REQUESTED)

    @staticmethod
    def may_see(authz, name: str | None, record, allow_auto: bool) -> bool:
        """Kafka's rule for a named topic: DESCRIBE on it; and when it would be created here, CREATE
        on the cluster or on the topic."""
        if record is None and name is None:
            return True  # an unknown topic id: UNKNOWN_TOPIC_ID
        if not authz.allowed(AclOperation.DESCRIBE, ResourceType.TOPIC, record.name if record is not None else name):
            return False
        if record is None and allow_auto:
            return (authz.quietly(AclOperation.CREATE, ResourceType.CLUSTER, CLUSTER_NAME)
                    or authz.allowed(AclOperation.CREATE, ResourceType.TOPIC, name))
        return True

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Each requested topic carries the error (Kafka's MetadataRequest.getErrorResponse)."""
        topics = tuple(ctx.build("MetadataResponseTopic", error_code=code, name=t.name if t.name is not None or
                                 ctx.api_version >= 12 else "", topic_id=getattr(t, "topic_id", None) or NO_TOPIC_ID,
                                 is_internal=False, partitions=()) for t in request.topics or ())
        return ctx.build("MetadataResponse", throttle_time=NO_THROTTLE, brokers=(), cluster_id=None,
                         controller_id=-1, topics=topics, error_code=code)


def _wants_topic_operations(request) -> bool:
    return bool(getattr(request, "include_topic_authorized_operations", False))


def _wants_cluster_operations(request) -> bool:
    """Only v8-10 have the field; Kafka answers it there alone."""
    return bool(getattr(request, "include_cluster_authorized_operations", False))


HANDLER = MetadataHandler
