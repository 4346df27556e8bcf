"""ListOffsets (key 2): earliest (-2), latest (-1), max timestamp (-3), or by timestamp."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.server.handlers.base import NO_THROTTLE, Handler, RequestContext

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
CONSUMER_REPLICA_ID = -1


class ListOffsetsHandler(Handler):
    api_key = 2
    min_version = 1
    max_version = 9

    async def handle(self, ctx: RequestContext, request):
        rm = self.broker.replicas
        topics = []
        for t in request.topics:
            parts = []
            for p in t.partitions:
                part, code, _ = rm.leader_or_error(t.name, p.partition_index)
                if part is None:
                    parts.append(ctx.build("ListOffsetsPartitionResponse", partition_index=p.partition_index,
                                           error_code=code, timestamp=-1, offset=-1, leader_epoch=-1))
                    continue
                lg = part.log
                ts, off = -1, -1
                if p.timestamp == LATEST:
                    # A consumer's latest is the high watermark; a replica's (a follower after
                    # OFFSET_OUT_OF_RANGE) the log end, as Kafka's isolation-less lookup.
                    off = lg.high_watermark if request.replica_id == CONSUMER_REPLICA_ID else lg.log_end_offset
                elif p.timestamp in (EARLIEST, EARLIEST_LOCAL):
                    off = lg.log_start_offset
                elif p.timestamp == LATEST_TIERED:
                    off = lg.log_start_offset - 1
                elif p.timestamp == MAX_TIMESTAMP:
                    off, ts = lg.max_timestamp()
                else:
                    found = lg.offset_for_timestamp(p.timestamp)
                    if found is not None and found[0] < lg.high_watermark:
                        off, ts = found
                parts.append(ctx.build("ListOffsetsPartitionResponse", partition_index=p.partition_index,
                                       error_code=ErrorCode.none, timestamp=ts, offset=off,
                                       leader_epoch=part.leader_epoch if off >= 0 else -1))
            topics.append(ctx.build("ListOffsetsTopicResponse", name=t.name, partitions=tuple(parts)))
        return ctx.build("ListOffsetsResponse", throttle_time=NO_THROTTLE, topics=tuple(topics))


HANDLER = ListOffsetsHandler
