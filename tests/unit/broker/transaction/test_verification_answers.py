"""KIP-890 part 1: the coordinator's verification answer as the Produce answer (Kafka's
AddPartitionsToTxnManager and ReplicaManager mapping for transaction version 1 clients)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker.coordinator.transaction.verification import for_producer


@pytest.mark.parametrize("coordinator,produce", [
    (ErrorCode.none, ErrorCode.none),
    (ErrorCode.transaction_abortable, ErrorCode.invalid_txn_state),
    (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch),
    (ErrorCode.concurrent_transactions, ErrorCode.not_enough_replicas),
    (ErrorCode.coordinator_load_in_progress, ErrorCode.not_enough_replicas),
    (ErrorCode.coordinator_not_available, ErrorCode.not_enough_replicas),
    (ErrorCode.not_coordinator, ErrorCode.not_enough_replicas),
    (ErrorCode.invalid_producer_id_mapping, ErrorCode.invalid_producer_id_mapping),
])
def test_mapping(coordinator: ErrorCode, produce: ErrorCode) -> None:
    assert for_producer(coordinator)[0] == produce
