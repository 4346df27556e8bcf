"""CreatePartitions (key 37): grow a topic's partition count (a CAS write of the topic's spec);
the controller assigns the new partitions (or they go where the request's `assignments` put them,
written with the new count) and the answer waits for that, bounded by the timeout."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.apis.handlers.create_topics import request_timeout
from broker.admin.topics import TopicError


class CreatePartitionsHandler(Handler):
    api_key = 37
    min_version = 0
    max_version = 3

    async def handle(self, ctx: RequestContext, request):
        out = []
        for t in request.topics:
            code, msg = ErrorCode.none, None
            try:
                if not ctx.authz.allowed(AclOperation.ALTER, ResourceType.TOPIC, t.name):
                    raise TopicError(ErrorCode.topic_authorization_failed, "Authorization failed.")
                lists = None if t.assignments is None else [a.broker_ids for a in t.assignments]
                await self.broker.topics.add_partitions(t.name, t.count, validate_only=request.validate_only,
                                                       timeout_s=request_timeout(request), assignments=lists)
            except TopicError as e:
                code, msg = e.code, e.message
            out.append(ctx.build("CreatePartitionsTopicResult", name=t.name, error_code=code, error_message=msg))
        return ctx.build("CreatePartitionsResponse", throttle_time=NO_THROTTLE, results=tuple(out))


HANDLER = CreatePartitionsHandler
