"""FindCoordinator (API 10): the broker leading the group's `__consumer_offsets` partition.

The first request creates `__consumer_offsets` (as Kafka does, so that its partitions spread over
the brokers alive by then) and answers COORDINATOR_NOT_AVAILABLE until the controller has given
the group's partition a leader; clients retry. Key type 1 (TRANSACTION) does the same with the
transactional id's `__transaction_state` partition.
v0-v3 ask for one key, v4+ for a batch (`coordinator_keys`, KIP-699).
"""

from __future__ import annotations

import logging

from kio.schema.errors import ErrorCode

from broker.coordinator.group.offsets_log import TOPIC
from broker.metadata import cluster_view
from broker.coordinator.transaction.txn_log import TOPIC as TXN_TOPIC
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.admin.topics import TopicError

log = logging.getLogger(__name__)

KEY_TYPE_GROUP = 0
KEY_TYPE_TRANSACTION = 1
CREATE_WAIT_S = 5.0


def _none(code: ErrorCode, message: str) -> dict:
    return dict(error_code=code, error_message=message, node_id=-1, host="", port=-1)


class FindCoordinatorHandler(Handler):
    api_key = 10
    min_version = 0
    max_version = 6

    def _store(self, key_type: int):
        """The coordinator's log: partition count, topic creation."""
        return self.broker.groups.store if key_type == KEY_TYPE_GROUP else self.broker.transactions.log

    async def _answer(self, ctx: RequestContext, key_type: int, key: str) -> dict:
        if key_type not in (KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION):
            return _none(ErrorCode.invalid_request, f"unknown coordinator key type {key_type}")
        if key_type == KEY_TYPE_GROUP:
            if not ctx.authz.allowed(AclOperation.DESCRIBE, ResourceType.GROUP, key):
                return _none(ErrorCode.group_authorization_failed, None)
        elif not ctx.authz.allowed(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
            return _none(ErrorCode.transactional_id_authorization_failed, None)
        b = self.broker
        store = self._store(key_type)
        topic = TOPIC if key_type == KEY_TYPE_GROUP else TXN_TOPIC
        if topic not in b.store.image.topics:
            try:
                await store.ensure_topic()
            except TopicError as e:
                log.warning("cannot create %s: %s", topic, e.message)
                return _none(ErrorCode.coordinator_not_available, f"{topic} cannot be created yet")
            # Usually the controller assigns it at once: spare the client a retry.
            await b.topics.wait_for_image(lambda img: self._leader(img, topic, store, key) >= 0, CREATE_WAIT_S)
        image = b.store.image
        store.refresh_partition_count()
        partition = store.partition_for(key)
        state = cluster_view.partition_state(image, topic, partition)
        if state is None or state.leader < 0:
            return _none(ErrorCode.coordinator_not_available, f"{topic}-{partition} has no leader yet")
        address = cluster_view.node_address(image, state.leader, cluster_view.listener_of(ctx))
        if address is None:
            return _none(ErrorCode.coordinator_not_available, f"broker {state.leader} has no endpoint here")
        return dict(error_code=ErrorCode.none, error_message=None, node_id=address.node_id,
                    host=address.host, port=address.port)

    def _leader(self, image, topic: str, store, key: str) -> int:
        if topic not in image.topics:
            return -1
        state = cluster_view.partition_state(image, topic, store.partition_for(key))
        return -1 if state is None else state.leader

    async def handle(self, ctx: RequestContext, request):
        if ctx.api_version < 4:
            key_type = getattr(request, "key_type", KEY_TYPE_GROUP)
            return ctx.build("FindCoordinatorResponse", throttle_time=NO_THROTTLE,
                             **await self._answer(ctx, key_type, request.key))
        coordinators = []
        for key in request.coordinator_keys:
            coordinators.append(ctx.build("Coordinator", key=key, **await self._answer(ctx, request.key_type, key)))
        return ctx.build("FindCoordinatorResponse", throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """v4+ carries errors per key: every requested key gets `code`."""
        if ctx.api_version < 4:
            return super().error_response(ctx, request, code, message)
        return ctx.build("FindCoordinatorResponse", throttle_time=NO_THROTTLE, coordinators=tuple(
            ctx.build("Coordinator", key=key, **_none(code, message)) for key in request.coordinator_keys))


HANDLER = FindCoordinatorHandler
