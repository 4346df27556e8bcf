"""Where a partition leader checks a transactional Produce with the transaction coordinator before
it opens a transaction on the partition (KIP-890 part 1, Kafka 3.6+: no "hanging" transaction
that no coordinator knows about and so nothing would ever end).

`needs_verification` is the rule: only a producer's first transactional batch on a partition
(no ongoing transaction of this producer there, or one of an older epoch) is checked, as Kafka's
ReplicaManager does; later batches of the same transaction are not. `verify` is the hook the
transaction coordinator's side fills in: ask the coordinator of `transactional_id`
(AddPartitionsToTxn v4+, verify_only) whether the partition is part of the producer's ongoing
transaction at this epoch, and answer its error (Kafka: INVALID_TXN_STATE when it is not,
NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / ... as the coordinator answered). Until then every
transactional append is accepted.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from broker.log.producer_state import ProducerStateManager
from broker.protocol.records import BatchHeader


def needs_verification(producer_state: ProducerStateManager, h: BatchHeader) -> bool:
    if not h.is_transactional:
        return False
    entry = producer_state.producers.get(h.producer_id)
    return entry is None or entry.txn_first_offset < 0 or entry.epoch != h.producer_epoch


async def verify(transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                 partition: int) -> tuple[ErrorCode, str | None]:
    """(error, message) of the coordinator's check; (NONE, None) lets the append go on."""
    return ErrorCode.none, None
