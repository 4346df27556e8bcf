"""Produce (key 0): validate record batches by their headers and append them.

acks=0 gets no response, and on any error the connection is closed (as Kafka does) so that the
producer notices and refreshes its metadata; acks=1 answers once the batch is in the leader's log;
acks=-1 (all) is refused with NOT_ENOUGH_REPLICAS while the ISR has fewer than min.insync.replicas
members, and otherwise waits in the purgatory (replica/delayed_produce.py) until the high watermark
passes the batch (the whole ISR has it), or the request's timeout (REQUEST_TIMED_OUT).
Idempotent producers' retries come back with their original offset instead of a second copy.
Transactional batches (KIP-98) are appended like idempotent ones after `_check_transactional`
(docs/transactions-partitions.md); the transaction they open holds the last stable offset.
A partition led by another broker answers NOT_LEADER_OR_FOLLOWER with that leader in the
response (KIP-951, v10+), so the client can go there without a metadata round trip.
"""

from __future__ import annotations

import datetime
import logging

from kio.schema.errors import ErrorCode

from broker.log.log import (DuplicateSequence, InvalidTimestamp, KeylessRecord, LogDirOffline, OutOfOrderSequence,
                            ProducerFenced, StorageError)
from broker.protocol.response import Response
from broker.protocol import produce_response, records
from broker.protocol.produce_response import PartitionResult
from broker.apis import transaction_verification
from broker.security.acl import AclOperation, ResourceType
from broker.apis.handlers.base import NO_THROTTLE, Handler, RequestContext, RequestRefused
from broker.replica.partition import effective_min_isr
from broker.apis.new_leaders import NewLeaders

log = logging.getLogger(__name__)


class ProduceHandler(Handler):
    api_key = 0
    min_version = produce_response.MIN_VERSION
    max_version = produce_response.MAX_VERSION

    async def handle(self, ctx: RequestContext, request):
        b = self.broker
        acks = request.acks
        topics_out = []
        hints = {}
        leaders = NewLeaders(ctx, b.store.image)
        waiting: dict[tuple[str, int], tuple[object, int, int]] = {}  # acks=all: what the ISR must reach
        pending: dict[tuple[str, int], PartitionResult] = {}
        authz = ctx.authz
        if (authz.enabled and request.transactional_id is not None
                and not authz.allowed(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, request.transactional_id)):
            raise RequestRefused(ErrorCode.transactional_id_authorization_failed,
                                 f"{ctx.user} may not write as transactional id {request.transactional_id!r}")
        by_id = ctx.api_version >= produce_response.FIRST_TOPIC_ID
        for topic_data in request.topic_data:
            if by_id:  # v13 (KIP-516): the topic id; an unknown one answers UNKNOWN_TOPIC_ID
                record = b.store.image.topic_by_id(topic_data.topic_id)
                name = record.name if record is not None else None
            else:
                name = topic_data.name
                record = b.store.image.topics.get(name)
            # An unknown topic id says nothing of a name to authorize: UNKNOWN_TOPIC_ID below.
            may_write = name is None or authz.allowed(AclOperation.WRITE, ResourceType.TOPIC, name)
            parts_out = []
            for pd in topic_data.partition_data:
                append_time = -1
                if not may_write:
                    code, base, start, msg = ErrorCode.topic_authorization_failed, -1, -1, None
                elif acks not in (0, 1, -1):
                    code, base, start, msg = ErrorCode.invalid_required_acks, -1, -1, f"acks={acks} is not 0, 1 or -1"
                elif name is None:
                    code, base, start, msg = (ErrorCode.unknown_topic_id, -1, -1,
                                              f"unknown topic id {topic_data.topic_id}")
                else:
                    code, base, start, msg, append_time, required = await self._append(
                        ctx, record, name, pd.index, pd.records, request, leaders)
                    if code == ErrorCode.not_leader_or_follower and ctx.has("LeaderIdAndEpoch"):
                        hints[(name, pd.index)] = leaders.current_leader(name, pd.index)
                    if required is not None:
                        waiting[(name, pd.index)] = required
                parts_out.append(PartitionResult(pd.index, code, base, start, msg, append_time))
                if (name, pd.index) in waiting:
                    pending[(name, pd.index)] = parts_out[-1]
            topics_out.append((topic_data.topic_id if by_id else name, name, parts_out))
        if waiting:
            await self._wait_for_replicas(ctx, request, waiting, pending)
        throttle_ms = self._quota_throttle_ms(ctx, acks)
        if acks == 0:
            errors = [f"{key}-{p.index}: {ErrorCode(p.error_code).name}" for key, _, parts in topics_out
                      for p in parts if p.error_code != ErrorCode.none]
            if not errors:
                return None
            log.info("closing connection %s from %s: acks=0 produce (correlation id %d) had errors: %s",
                     getattr(ctx.connection, "id", "?"), getattr(ctx.connection, "peer", "?"),
                     ctx.header.correlation_id, ", ".join(errors))
            return Response([], close_after=True)
        if not hints:  # the common case, encoded by hand (kio's writer was a quarter of the CPU)
            return Response([produce_response.encode_produce_response(
                ctx.api_version, ctx.header.correlation_id, [(key, parts) for key, _, parts in topics_out],
                throttle_ms)])
        return self._response_with_leader_hints(ctx, topics_out, hints, leaders)

    async def _wait_for_replicas(self, ctx, request, waiting, pending) -> None:
        """acks=all: wait until the ISR holds every appended batch, or the request times out."""
        timeout_s = max(request.timeout.total_seconds(), 0.0)
        replicated = await self.broker.replicas.wait_for_isr(waiting, timeout_s)
        for tp, result in pending.items():
            code = replicated[tp]
            if code != ErrorCode.none:
                result.error_code = code
                result.error_message = {
                    ErrorCode.request_timed_out: f"the in-sync replicas did not confirm within {timeout_s:g}s",
                    ErrorCode.not_enough_replicas_after_append: "the batch is written but fewer in-sync replicas "
                                                                "than min.insync.replicas hold it",
                    ErrorCode.not_leader_or_follower: "this broker stopped leading the partition",
                }.get(code)
                if code == ErrorCode.request_timed_out or code == ErrorCode.not_leader_or_follower:
                    result.base_offset = -1

    def _quota_throttle_ms(self, ctx: RequestContext, acks: int) -> int:
        """KIP-13: the request's bytes count against its produce quota, its handler time against
        its request quota (not for acks=0, as Kafka); the larger throttle is the answer's."""
        quotas = self.broker.quotas
        if acks == 0:
            quotas.skip_request_quota(ctx)
        quotas.bandwidth_throttle_ms(quotas.produce, ctx, ctx.request_size)
        return ctx.throttle_ms

    @staticmethod
    def _response_with_leader_hints(ctx, topics_out, hints, leaders):
        """KIP-951's tagged CurrentLeader and NodeEndpoints, written by kio (the dispatcher sets the throttle time)."""
        return ctx.build("ProduceResponse", throttle_time=NO_THROTTLE, node_endpoints=leaders.node_endpoints(),
                         responses=tuple(ctx.build("TopicProduceResponse", name=name, topic_id=key,
                                                   partition_responses=tuple(
                             ctx.build("PartitionProduceResponse", index=p.index, error_code=p.error_code,
                                       base_offset=p.base_offset, log_append_time=_timestamp(p.log_append_time_ms),
                                       log_start_offset=p.log_start_offset, record_errors=(),
                                       error_message=p.error_message,
                                       **({"current_leader": hints[(name, p.index)]} if (name, p.index) in hints else {}))
                             for p in parts)) for key, name, parts in topics_out))

    def error_response(self, ctx: RequestContext, request, code: ErrorCode, message: str):
        """Every requested partition gets `code`; acks=0 expects no answer, so close instead."""
        if request.acks == 0:
            return None
        topics = tuple(ctx.build("TopicProduceResponse", name=getattr(t, "name", None),
                                 topic_id=getattr(t, "topic_id", None), partition_responses=tuple(
            ctx.build("PartitionProduceResponse", index=p.index, error_code=code, base_offset=-1, log_append_time=None,
                      log_start_offset=-1, record_errors=(), error_message=message)
            for p in t.partition_data)) for t in request.topic_data)
        return ctx.build("ProduceResponse", responses=topics, throttle_time=NO_THROTTLE)

    async def _check_transactional(self, request, name, index, part, headers):
        """Kafka's checks of a transactional Produce before the append (KIP-98): clients never write
        control batches (INVALID_RECORD); transactional batches need a transactional id
        (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, as Kafka's authorizer answers a null id) and a
        producer id; the first batch of a transaction on this partition is verified with the
        coordinator (KIP-890 part 1, apis/transaction_verification.py). None: go on."""
        if any(h.is_control for h in headers):
            return ErrorCode.invalid_record, -1, -1, "clients may not write control batches", -1, None
        txn = [h for h in headers if h.is_transactional]
        if not txn:
            return None
        if request.transactional_id is None:
            return (ErrorCode.transactional_id_authorization_failed, -1, -1,
                    "a transactional batch needs the request's transactional id", -1, None)
        h = txn[0]
        if not h.has_producer_id or len(txn) != len(headers):
            return (ErrorCode.invalid_record, -1, -1,
                    "transactional batches need a producer id, and cannot be mixed with others", -1, None)
        if (self.broker.config["transaction.partition.verification.enable"]
                and transaction_verification.needs_verification(part.log.producer_state, h)):
            code, message = await transaction_verification.verify(
                self.broker.txn_verifier, request.transactional_id, h.producer_id,
                h.producer_epoch, name, index)
            if code != ErrorCode.none:
                return code, -1, -1, message, -1, None
        return None

    async def _append(self, ctx, record, name, index, payload, request, leaders):
        """(error, base offset, log start offset, message, log append time or -1, what acks=all waits
        for: (partition, leader epoch, offset the high watermark must reach) or None)."""
        b = self.broker
        if record is None:
            return ErrorCode.unknown_topic_or_partition, -1, -1, f"unknown topic {name!r}", -1, None
        if record.is_internal:
            return ErrorCode.invalid_topic_exception, -1, -1, f"{name} is an internal topic", -1, None
        part, code, state = b.replicas.leader_or_error(name, index)
        if part is None:
            return code, -1, -1, leaders.explain(code, name, index, state), -1, None
        if b.replicas.writes_fenced(part):
            return (ErrorCode.not_leader_or_follower, -1, -1, f"broker {b.node_id} could not renew its Lease in time "
                    f"and a follower stopped fetching: another broker may lead {name}-{index} now", -1, None)
        if payload is None:
            return ErrorCode.corrupt_message, -1, -1, "no records", -1, None
        try:
            headers = records.validate_batches(payload, part.log.config.max_message_bytes)
        except records.RecordTooLargeError as e:
            return ErrorCode.message_too_large, -1, -1, str(e), -1, None
        except records.CorruptRecordError as e:
            return ErrorCode.corrupt_message, -1, -1, str(e), -1, None
        except records.InvalidRecordError as e:
            return ErrorCode.invalid_record, -1, -1, str(e), -1, None
        refused = await self._check_transactional(request, name, index, part, headers)
        if refused is not None:
            return refused
        if request.acks == -1:
            # Kafka's effectiveMinIsr: min.insync.replicas, capped by the number of replicas; the
            # ISR as this leader knows it (committed to the metadata).
            rs = part.replica_state
            min_isr = effective_min_isr(part)
            if not rs.has_min_isr(min_isr):
                return (ErrorCode.not_enough_replicas, -1, -1, f"{name}-{index} has {len(rs.isr)} in-sync "
                        f"replicas, fewer than {min_isr} (min.insync.replicas)", -1, None)
        # The epoch the batch is appended at (append_async writes before its first await): acks=all
        # waits for the ISR of this epoch. Read after the flush await, it could be a later epoch of
        # this broker's, whose high watermark would acknowledge records that epoch truncated.
        epoch = part.leader_epoch
        try:
            result = await b.replicas.append_async(part, payload, headers)
        except DuplicateSequence as e:
            required = (part, epoch, e.base_offset + 1) if request.acks == -1 else None
            return ErrorCode.none, e.base_offset, part.log.log_start_offset, None, -1, required
        except OutOfOrderSequence as e:
            return ErrorCode.out_of_order_sequence_number, -1, -1, str(e), -1, None
        except InvalidTimestamp as e:
            return ErrorCode.invalid_timestamp, -1, -1, str(e), -1, None
        except (KeylessRecord, records.InvalidRecordError) as e:
            return ErrorCode.invalid_record, -1, -1, str(e), -1, None
        except ProducerFenced as e:
            return ErrorCode.invalid_producer_epoch, -1, -1, str(e), -1, None
        except StorageError as e:
            if not isinstance(e, LogDirOffline):  # an offline dir was reported once, when it failed
                log.error("%s", e)
            return ErrorCode.kafka_storage_error, -1, -1, str(e), -1, None
        size = len(payload)
        topic_metrics = b.metrics.topic(name)
        topic_metrics.bytes_in.inc(size)
        topic_metrics.messages_in.inc(sum(h.records_count for h in headers))
        required = (part, epoch, result.last_offset + 1) if request.acks == -1 else None
        return ErrorCode.none, result.base_offset, result.log_start_offset, None, result.log_append_time, required


def _timestamp(ms: int) -> datetime.datetime | None:
    """The response's log_append_time for kio: None (-1) unless the topic uses LogAppendTime."""
    return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.timezone.utc)


HANDLER = ProduceHandler
