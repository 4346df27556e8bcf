"""Where a partition leader checks a transactional Produce with the transaction coordinator before
it opens a transaction on the partition (KIP-890 part 1, Kafka 3.6+: no "hanging" transaction
that no coordinator knows about and so nothing would ever end).

`needs_verification` is the rule: only a producer's first transactional batch on a partition
(no ongoing transaction of this producer there, or one of an older epoch) is checked, as Kafka's
ReplicaManager does; later batches of the same transaction are not. The question itself is the
transaction coordinator side's `TxnVerifier` (broker/coordinator/transaction/verification.py,
`broker.txn_verifier`): AddPartitionsToTxn v4 verify_only to the id's coordinator, its answer
mapped as Kafka maps it for the producer.
"""

from __future__ import annotations


from broker.log.producer_state import ProducerStateManager
from broker.protocol.records import BatchHeader


def needs_verification(producer_state: ProducerStateManager, h: BatchHeader) -> bool:
    if not h.is_transactional:
        return False
    entry = producer_state.producers.get(h.producer_id)
    return entry is None or entry.txn_first_offset < 0 or entry.epoch != h.producer_epoch
