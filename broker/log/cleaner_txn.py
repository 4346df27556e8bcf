"""What one cleaning knows about transactions (Kafka's CleanedTransactionMetadata).

The cleaner reads the log from its start in offset order; this tracks, per producer, whether
batches of the transaction it is in were seen and are still in the log, so that:

- records of an aborted transaction (the aborted transaction indexes list them) are dropped;
- a COMMIT marker may go only if no batch of its transaction was seen in this pass (they were
  all compacted away earlier), and an ABORT marker only if no batch of its aborted transaction
  is left (not even the empty header kept for a producer's sequence numbers);
- the aborted transaction index of the cleaned segments keeps only the entries whose marker
  stays with data before it (Kafka drops the rest: nothing is left for a reader to skip).

A marker that may go is not removed at once: the first cleaning that finds it removable stamps
its batch with a delete horizon (now + delete.retention.ms), as a tombstone's, and a cleaning
after that horizon removes it. A consumer that read the data before the cleaning thus still
meets the marker if it reads on within delete.retention.ms.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.log.transaction_index import AbortedTxn
from broker.protocol import control_records, records
from broker.protocol.records import BatchHeader


@dataclass(slots=True)
class _OpenAbort:
    txn: AbortedTxn
    seen_batch: bool = False


class TxnCleaning:
    """One pass over the log, batch by batch in offset order (`on_data`, `on_marker`)."""

    def __init__(self, aborted: list[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._open_aborts: dict[int, _OpenAbort] = {}
        self._open_commits: set[int] = set()
        self.kept_index: list[AbortedTxn] = []  # index entries that stay, in marker order
        self._by_producer: dict[int, list[AbortedTxn]] = {}
        for t in self._pending:
            self._by_producer.setdefault(t.producer_id, []).append(t)

    def _reach(self, offset: int) -> None:
        """Aborted transactions that have started by `offset` become open for their producer."""
        while self._next < len(self._pending) and self._pending[self._next].first_offset <= offset:
            t = self._pending[self._next]
            self._open_aborts[t.producer_id] = _OpenAbort(t)
            self._next += 1

    def is_aborted(self, h: BatchHeader) -> bool:
        """A transactional data batch of an aborted transaction (no state change)."""
        if not h.is_transactional or h.is_control:
            return False
        return any(t.first_offset <= h.base_offset <= t.last_offset for t in self._by_producer.get(h.producer_id, ()))

    def on_data(self, h: BatchHeader) -> bool:
        """A data batch read; True if it belongs to an aborted transaction (its records go)."""
        self._reach(h.last_offset)
        if not h.is_transactional:
            return False
        open_abort = self._open_aborts.get(h.producer_id)
        if open_abort is not None:
            open_abort.seen_batch = True
            return True
        self._open_commits.add(h.producer_id)
        return False

    def on_marker(self, h: BatchHeader, data: bytes) -> bool:
        """A control batch read; True if nothing of its transaction is left before it, so it may
        be removed once its delete horizon has passed. Unreadable or other control types stay."""
        self._reach(h.last_offset)
        if h.records_count == 0:
            return True  # an empty control batch: already cleaned
        try:
            marker = control_records.read_marker(data, h)
        except records.InvalidRecordError:
            return False
        if marker is None:
            return False
        if marker.commit:
            if h.producer_id in self._open_commits:
                self._open_commits.discard(h.producer_id)
                return False
            return True
        open_abort = self._open_aborts.pop(h.producer_id, None)
        if open_abort is not None and open_abort.seen_batch:
            self.kept_index.append(open_abort.txn)
            return False
        return True
