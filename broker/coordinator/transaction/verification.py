"""KIP-890 part 1 from a partition leader's side (Kafka's AddPartitionsToTxnManager): before a
producer's first transactional batch opens a transaction on a partition, ask the transaction
coordinator of its transactional id whether the partition is in the producer's ongoing
transaction at that epoch, so no transaction nothing will ever end can start ("hanging").

The coordinator is the leader of the id's `__transaction_state` partition: this broker's own
coordinator is asked directly, another broker with AddPartitionsToTxn v4 (verify_only) over a
Kafka-protocol connection to its inter-broker listener. The answer becomes what the producer is
told, as Kafka maps it for clients of transaction version 1: not in the transaction ->
INVALID_TXN_STATE; PRODUCER_FENCED -> INVALID_PRODUCER_EPOCH; the coordinator busy, moving or
unreachable -> NOT_ENOUGH_REPLICAS (the producer retries without a metadata refresh).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kio.schema.add_partitions_to_txn.v4.request import (AddPartitionsToTxnRequest, AddPartitionsToTxnTopic,
                                                         AddPartitionsToTxnTransaction)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i64

from broker.coordinator.transaction.txn_log import TOPIC
from broker.coordinator.transaction.inter_broker import InterBrokerConnections
from broker.network.client import ClientError
from broker.metadata import cluster_view

if TYPE_CHECKING:
    from broker.coordinator.transaction.coordinator import TransactionCoordinator
    from broker.metadata.store import MetadataStore

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 30.0
RETRIABLE = {ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
             ErrorCode.coordinator_not_available, ErrorCode.not_coordinator}


def for_producer(code: ErrorCode) -> tuple[ErrorCode, str | None]:
    """The coordinator's answer for one partition as the Produce answer (Kafka's mapping)."""
    if code == ErrorCode.none:
        return code, None
    if code in (ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state):
        return ErrorCode.invalid_txn_state, "Partition was not added to the transaction"
    if code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch, None
    if code in RETRIABLE:
        return ErrorCode.not_enough_replicas, (
            f"Unable to verify the partition has been added to the transaction. Underlying error: {code.name}")
    return code, None


class TxnVerifier:
    def __init__(self, coordinator: "TransactionCoordinator", store: "MetadataStore", node_id: int,
                 listener: str, security: Any = None) -> None:
        self.coordinator, self.store, self.node_id, self.listener = coordinator, store, node_id, listener
        self._conns = InterBrokerConnections(store, listener, f"flotilla-txn-verify-{node_id}", security)
        self._locks: dict[int, asyncio.Lock] = {}

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                     partition: int) -> tuple[ErrorCode, str | None]:
        return for_producer(await self._ask(transactional_id, producer_id, producer_epoch, (topic, partition)))

    async def _ask(self, tid: str, producer_id: int, epoch: int, tp: tuple[str, int]) -> ErrorCode:
        if not tid:
            return ErrorCode.invalid_request
        log_ = self.coordinator.log
        log_.refresh_partition_count()
        state = cluster_view.partition_state(self.store.image, TOPIC, log_.partition_for(tid))
        if state is None or state.leader < 0:
            return ErrorCode.coordinator_not_available
        if state.leader == self.node_id:
            return self.coordinator.verify_partitions(tid, producer_id, epoch, {tp})[tp]
        request = AddPartitionsToTxnRequest(transactions=(AddPartitionsToTxnTransaction(
            transactional_id=tid, producer_id=i64(producer_id), producer_epoch=i16(epoch), verify_only=True,
            topics=(AddPartitionsToTxnTopic(name=tp[0], partitions=(i32(tp[1]),)),)),))
        lock = self._locks.setdefault(state.leader, asyncio.Lock())
        async with lock:
            try:
                conn = await self._conns.get(state.leader)
                response = await conn.request(request, REQUEST_TIMEOUT_S)
            except ClientError as e:
                log.info("verifying %s with broker %d: %s", tid, state.leader, e)
                self._conns.drop(state.leader)
                return ErrorCode.coordinator_not_available
        if response.error_code != ErrorCode.none:
            if response.error_code == ErrorCode.cluster_authorization_failed:
                return ErrorCode.invalid_txn_state
            return response.error_code
        for txn in response.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    if (t.name, int(p.partition_index)) == tp:
                        return p.partition_error_code
        return ErrorCode.unknown_server_error

    def close(self) -> None:
        self._conns.close()
