"""The last stable offset (LSO) of a partition (KIP-98): the offset below which every
transaction is decided and replicated. read_committed consumers read only below it.

As Kafka's ProducerStateManager.firstUnstableOffset: the smallest first offset over the
ongoing transactions and over the transactions whose marker is written but not yet below the
high watermark (a marker that may still be truncated away decides nothing); the LSO is that,
capped by the high watermark. Pure state, no I/O.
"""

from __future__ import annotations

from collections import deque

from broker.log.producer_state import CompletedTxn


class StableOffsetTracker:
    def __init__(self) -> None:
        self.unreplicated: deque[CompletedTxn] = deque()  # in marker order

    def completed(self, txn: CompletedTxn) -> None:
        self.unreplicated.append(txn)

    def clear(self) -> None:
        self.unreplicated.clear()

    def last_stable_offset(self, ongoing: dict[int, int], high_watermark: int) -> int:
        while self.unreplicated and self.unreplicated[0].last_offset < high_watermark:
            self.unreplicated.popleft()
        lso = high_watermark
        if ongoing:
            lso = min(lso, min(ongoing.values()))
        for txn in self.unreplicated:
            lso = min(lso, txn.first_offset)
        return lso

    def stable_after(self, txn: CompletedTxn, ongoing: dict[int, int]) -> int:
        """The LSO once `txn` is complete, other transactions as they are (the `last_stable_offset`
        of its aborted-index entry, Kafka's ProducerStateManager.lastStableOffset)."""
        firsts = [first for pid, first in ongoing.items() if pid != txn.producer_id]
        firsts += [t.first_offset for t in self.unreplicated if t.producer_id != txn.producer_id]
        return min(firsts) if firsts else txn.last_offset + 1
