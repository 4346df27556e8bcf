"""DeleteTopics (key 20): by name, or by topic id from v6."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.store import NO_TOPIC_ID
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.apis.handlers.create_topics import request_timeout
from broker.admin.topics import TopicError



class DeleteTopicsHandler(Handler):
    api_key = 20
    min_version = 1
    max_version = 6

    async def handle(self, ctx: RequestContext, request):
        b = self.broker
        if hasattr(request, "topic_names"):
            wanted = [(n, None) for n in request.topic_names]
        else:
            wanted = [(t.name, t.topic_id) for t in request.topics]
        if not b.config["delete.topic.enable"]:
            return self._refused(ctx, wanted)
        out = []
        for name, topic_id in wanted:
            if name is None and topic_id not in (None, NO_TOPIC_ID):
                rec = b.store.image.topic_by_id(topic_id)
                name = rec.name if rec else None
            code, msg = ErrorCode.none, None
            rec = b.store.image.topics.get(name) if name else None
            if name is not None and not ctx.authz.allowed(AclOperation.DELETE, ResourceType.TOPIC, name):
                code, msg = ErrorCode.topic_authorization_failed, "Authorization failed."
                rec = None if topic_id in (None, NO_TOPIC_ID) else rec
            elif rec is None:
                code = ErrorCode.unknown_topic_id if name is None else ErrorCode.unknown_topic_or_partition
                msg = "unknown topic"
            else:
                try:
                    await b.topics.delete(name, timeout_s=request_timeout(request))
                except TopicError as e:
                    code, msg = e.code, e.message
            out.append(ctx.build("DeletableTopicResult", name=name, topic_id=rec.topic_id if rec else (topic_id or NO_TOPIC_ID),
                                 error_code=code, error_message=msg))
        return ctx.build("DeleteTopicsResponse", throttle_time=NO_THROTTLE, responses=tuple(out))

    @staticmethod
    def _refused(ctx: RequestContext, wanted: list) -> object:
        """delete.topic.enable=false: every topic named is refused before anything is looked up,
        as Kafka's controller does (INVALID_REQUEST for clients older than v3's error code)."""
        code = ErrorCode.topic_deletion_disabled if ctx.api_version >= 3 else ErrorCode.invalid_request
        out = tuple(ctx.build("DeletableTopicResult", name=name, topic_id=topic_id or NO_TOPIC_ID, error_code=code,
                              error_message="Topic deletion is disabled (delete.topic.enable=false).")
                    for name, topic_id in wanted)
        return ctx.build("DeleteTopicsResponse", throttle_time=NO_THROTTLE, responses=out)


HANDLER = DeleteTopicsHandler
