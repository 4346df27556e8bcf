"""Where a partition leader checks a transactional Produce with the transaction coordinator before
it opens a transaction on the partition (KIP-890 part 1, Kafka 3.6+: no "hanging" transaction
that no coordinator knows about and so nothing would ever end).

`needs_verification` is the rule: only a producer's first transactional batch on a partition
(no ongoing transaction of this producer there, or one of an older epoch) is checked, as Kafka's
ReplicaManager does; later batches of the same transaction are not; nothing is checked with
`transaction.partition.verification.enable=false` (Kafka's key). `verify` is the hook: it asks
the broker's `txn_verifier` (the transaction coordinator's side: AddPartitionsToTxn v4+
verify_only to the id's coordinator) and answers its error (Kafka: INVALID_TXN_STATE when the
partition is not in the transaction, ...); a broker without one accepts every append.
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


async def verify(verifier, transactional_id: str, producer_id: int, producer_epoch: int, topic: str,
                 partition: int) -> tuple[ErrorCode, str | None]:
    """(error, message) of the coordinator's check; (NONE, None) lets the append go on."""
    if verifier is None:
        return ErrorCode.none, None
    return await verifier.verify(transactional_id, producer_id, producer_epoch, topic, partition)
