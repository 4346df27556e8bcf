"""KIP-320: a client names the leader epoch it believes current; the leader checks it.

Fetch, ListOffsets and OffsetForLeaderEpoch carry `current_leader_epoch`. Older than the
partition's epoch here: the client's metadata is stale (FENCED_LEADER_EPOCH: it must refresh
and not read from this broker as if it were still that epoch's leader). Newer: this broker has
not yet learned of the leader change the client knows (UNKNOWN_LEADER_EPOCH: retry). -1 means
the client did not say, and nothing is checked (Kafka's Optional.empty); Kafka's Fetch reads any
negative value so (callers pass max(epoch, -1)), ListOffsets and OffsetForLeaderEpoch only -1.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

NO_EPOCH = -1


def check_current_leader_epoch(requested: int, epoch: int) -> ErrorCode:
    """The error for a request that names `requested` as the current epoch of a partition whose
    epoch here is `epoch` (Kafka's Partition.checkCurrentLeaderEpoch)."""
    if requested == NO_EPOCH or requested == epoch:
        return ErrorCode.none
    return ErrorCode.fenced_leader_epoch if requested < epoch else ErrorCode.unknown_leader_epoch
