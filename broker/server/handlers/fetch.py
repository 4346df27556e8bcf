"""Fetch (key 1): read record batches, long-polling until min_bytes arrive or max_wait passes.

Record bytes are not copied: reads give file regions that the connection sends with
sendfile(), framed by the hand-written encoder in broker.protocol.fetch_response.
Until fetch sessions (KIP-227) land, every response carries session_id 0 (no session).
A partition led by another broker answers NOT_LEADER_OR_FOLLOWER with the leader's id, epoch
and endpoint in the tagged fields (KIP-951), as Kafka does.
"""

from __future__ import annotations


from kio.schema.errors import ErrorCode

from broker.log.log import OffsetOutOfRange
from broker.network.response import Response
from broker.protocol import fetch_response
from broker.protocol.fetch_response import PartitionResult, TopicResult
from broker.server import cluster_view
from broker.server.handlers.base import Handler, RequestContext
from broker.server.purgatory import DelayedOperation


class DelayedFetch(DelayedOperation):
    """Completes once the requested partitions hold at least `min_bytes` past the fetch offsets."""

    def __init__(self, handler: "FetchHandler", wanted, min_bytes: int) -> None:
        super().__init__()
        self.handler = handler
        self.wanted = wanted
        self.min_bytes = min_bytes

    def can_complete(self) -> bool:
        _, size, errors = self.handler.read_all(self.wanted, 2**31 - 1)
        return errors or size >= self.min_bytes


class FetchHandler(Handler):
    api_key = 1
    min_version = fetch_response.MIN_VERSION
    max_version = fetch_response.MAX_VERSION

    def resolve(self, ctx: RequestContext, request):
        """[(topic name or None, topic id, [(partition, offset, max_bytes)])] in request order."""
        image = self.broker.store.image
        out = []
        for t in request.topics:
            if ctx.api_version >= fetch_response.FIRST_TOPIC_ID:
                rec = image.topic_by_id(t.topic_id)
                name, topic_id = (rec.name if rec else None), t.topic_id
            else:
                rec = image.topics.get(t.topic)
                name, topic_id = t.topic, (rec.topic_id if rec else None)
            out.append((name, topic_id, [(p.partition, p.fetch_offset, p.partition_max_bytes) for p in t.partitions]))
        return out

    def read_all(self, wanted, max_bytes: int):
        """Read every partition; returns (topic results, record bytes total, any error?)."""
        rm = self.broker.replicas
        results: list[TopicResult] = []
        total = 0
        errors = False
        for name, topic_id, parts in wanted:
            tr = TopicResult(name=name, topic_id=topic_id)
            for index, offset, part_max in parts:
                if name is None:
                    code = ErrorCode.unknown_topic_id if topic_id is not None else ErrorCode.unknown_topic_or_partition
                    part, state = None, None
                else:
                    part, code, state = rm.leader_or_error(name, index)
                    if code == ErrorCode.leader_not_available:
                        code = ErrorCode.not_leader_or_follower  # what Kafka's Fetch answers for it
                if part is None:
                    pr = PartitionResult(index, error_code=code)
                    if code == ErrorCode.not_leader_or_follower:
                        pr.current_leader = (state.leader, state.leader_epoch) if state is not None else (-1, -1)
                    tr.partitions.append(pr)
                    errors = True
                    continue
                lg = part.log
                pr = PartitionResult(index, high_watermark=lg.high_watermark, last_stable_offset=lg.high_watermark,
                                     log_start_offset=lg.log_start_offset, aborted_transactions=None)
                try:
                    budget = min(part_max, max_bytes - total)
                    region = rm.read(part, offset, max(budget, 0), min_one=(total == 0))
                except OffsetOutOfRange:
                    pr.error_code = ErrorCode.offset_out_of_range
                    pr.high_watermark = lg.high_watermark
                    errors = True
                    region = None
                if region is not None and (budget > 0 or total == 0):
                    pr.records = region
                    total += region.length
                else:
                    pr.records = b""
                tr.partitions.append(pr)
            results.append(tr)
        return results, total, errors

    def leader_endpoints(self, ctx: RequestContext, results) -> list[fetch_response.NodeEndpoint]:
        """KIP-951: where the leaders named in NOT_LEADER_OR_FOLLOWER answers are."""
        image = self.broker.store.image
        listener = cluster_view.listener_of(ctx)
        nodes = {}
        for tr in results:
            for pr in tr.partitions:
                if pr.current_leader is not None and pr.current_leader[0] >= 0 and pr.current_leader[0] not in nodes:
                    a = cluster_view.node_address(image, pr.current_leader[0], listener)
                    if a is not None:
                        nodes[a.node_id] = fetch_response.NodeEndpoint(a.node_id, a.host, a.port, a.rack)
        return [nodes[k] for k in sorted(nodes)]

    async def handle(self, ctx: RequestContext, request):
        wanted = self.resolve(ctx, request)
        max_bytes = getattr(request, "max_bytes", 2**31 - 1)
        results, total, errors = self.read_all(wanted, max_bytes)
        max_wait_s = request.max_wait.total_seconds()
        if total < request.min_bytes and not errors and max_wait_s > 0 and wanted:
            op = DelayedFetch(self, wanted, request.min_bytes)
            keys = [(name, index) for name, _, parts in wanted if name for index, _, _ in parts]
            await self.broker.fetch_purgatory.wait(op, keys, max_wait_s)
            results, total, errors = self.read_all(wanted, max_bytes)
        for tr in results:
            if tr.name is not None:
                size = sum(p.records_size for p in tr.partitions)
                if size:
                    self.broker.metrics.bytes_out.labels(tr.name).inc(size)
        chunks = fetch_response.encode_fetch_response(
            ctx.api_version, ctx.header.correlation_id, throttle_time_ms=0, error_code=0, session_id=0,
            topics=results, node_endpoints=self.leader_endpoints(ctx, results))
        return Response(chunks)


HANDLER = FetchHandler
