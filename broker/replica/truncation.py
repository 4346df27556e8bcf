"""Where a follower truncates after OffsetForLeaderEpoch (KIP-101/279), as Kafka's
AbstractFetcherThread.getOffsetTruncationState. Pure: no I/O, so it is tested on epoch sequences.

The follower asks for its latest epoch; the leader answers the largest epoch it knows at or below
that one, with the offset where it ended in the leader's log. If the follower holds that epoch,
the logs agree below min(the leader's end of it, its own end of it): done. If it does not (the
logs diverged more than once, e.g. after two unclean elections) it can only trust what it wrote
before that epoch: it truncates part-way, to its own end of the largest epoch below the answered
one, and asks again with what is then its latest epoch, until the answer is an epoch it holds.
Each round asks a smaller epoch, so this ends.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.log.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, LeaderEpochCache


@dataclass(frozen=True, slots=True)
class TruncationState:
    """Truncate to `offset`; `completed` False: ask OffsetForLeaderEpoch again afterwards."""

    offset: int
    completed: bool
    why: str = ""


def own_end_for_epoch(epochs: LeaderEpochCache, epoch: int, log_end_offset: int) -> tuple[int, int] | None:
    """(largest epoch of this log at or below `epoch`, where it ends here), or None when this log
    has no such epoch (Kafka's UnifiedLog.endOffsetForEpoch)."""
    found_epoch, end = epochs.end_offset_for(epoch, log_end_offset)
    if end == UNDEFINED_EPOCH_OFFSET:
        return None
    return found_epoch, end


def truncation_state(leader_epoch: int, leader_end_offset: int, epochs: LeaderEpochCache,
                     log_end_offset: int) -> TruncationState:
    """The follower's next step from the leader's answer (`leader_epoch`, `leader_end_offset`).

    An undefined end offset (the leader knows no epoch at or below the one asked) keeps the
    fetch offset, which for a follower with epochs is its log end (Kafka's initial fetch offset);
    an undefined epoch with an end offset (a pre-KIP-279 answer) truncates to that offset."""
    if leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        return TruncationState(log_end_offset, True, "the leader knows no such epoch; keeping the fetch offset")
    if leader_epoch == UNDEFINED_EPOCH:
        return TruncationState(min(leader_end_offset, log_end_offset), True, "the leader's offset (no epoch)")
    own = own_end_for_epoch(epochs, leader_epoch, log_end_offset)
    if own is None:
        # Epochs below any this log tracks: the leader's offset is all there is to go by.
        return TruncationState(min(leader_end_offset, log_end_offset), True,
                               f"the leader's end of epoch {leader_epoch}, below every epoch held here")
    own_epoch, own_end = own
    if own_epoch != leader_epoch:
        return TruncationState(min(own_end, log_end_offset), False,
                               f"the end of epoch {own_epoch} here: the leader answered epoch {leader_epoch}, "
                               f"which this log lacks; asking again")
    return TruncationState(min(own_end, leader_end_offset, log_end_offset), True,
                           f"the end of epoch {leader_epoch}, the latest both logs hold")
