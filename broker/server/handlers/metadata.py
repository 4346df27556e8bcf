"""Metadata (key 3): brokers, and topics with their partitions and leaders.

Unknown topics are created here when auto.create.topics.enable is on and the client allows it
(v4+ asks explicitly), as Kafka does.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.metadata.store import NO_TOPIC_ID
from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext
from broker.server.topics import TopicError



class MetadataHandler(Handler):
    api_key = 3
    min_version = 0
    max_version = 12

    async def handle(self, ctx: RequestContext, request):
        b = self.broker
        adv = b.advertised
        brokers = (ctx.build("MetadataResponseBroker", node_id=b.node_id, host=adv.host, port=adv.port, rack=None),)
        store = b.store
        if request.topics is None or (ctx.api_version == 0 and not request.topics):
            wanted = [(t.name, None) for t in sorted(store.topics().values(), key=lambda t: t.name)]
        else:
            wanted = [(t.name, getattr(t, "topic_id", None)) for t in request.topics]
        allow_auto = getattr(request, "allow_auto_topic_creation", True) and b.config["auto.create.topics.enable"]
        topics = []
        for name, topic_id in wanted:
            record = store.topic(name) if name is not None else (
                store.topic_by_id(topic_id) if topic_id not in (None, NO_TOPIC_ID) else None)
            error = ErrorCode.none
            if record is None and name is not None and allow_auto:
                try:
                    record = b.topics.create(name)
                except TopicError as e:
                    error = e.code
            if record is None:
                if error == ErrorCode.none:
                    error = ErrorCode.unknown_topic_or_partition if name is not None else ErrorCode.unknown_topic_id
                topics.append(ctx.build("MetadataResponseTopic", error_code=error, name=name,
                                        topic_id=topic_id or NO_TOPIC_ID, is_internal=False, partitions=()))
                continue
            partitions = tuple(
                ctx.build("MetadataResponsePartition", error_code=ErrorCode.none, partition_index=p,
                          leader_id=b.node_id, leader_epoch=0, replica_nodes=(b.node_id,),
                          isr_nodes=(b.node_id,), offline_replicas=())
                for p in range(record.partitions))
            topics.append(ctx.build("MetadataResponseTopic", error_code=ErrorCode.none, name=record.name,
                                    topic_id=record.topic_id, is_internal=record.is_internal,
                                    partitions=partitions))
        return ctx.build("MetadataResponse", throttle_time=NO_THROTTLE, brokers=brokers, cluster_id=b.cluster_id,
                         controller_id=b.node_id, topics=tuple(topics))


HANDLER = MetadataHandler
