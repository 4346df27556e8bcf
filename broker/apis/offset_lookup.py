"""What ListOffsets answers for one partition led here (Kafka's Partition.fetchOffsetForTimestamp
and the checks ReplicaManager.fetchOffset makes on its result).

A consumer (replica id -1) is only told offsets below the high watermark, the last offset it
could fetch: a timestamp or MAX_TIMESTAMP lookup that lands on a record at or past it answers
no offset (-1), as if that record did not exist yet, since it may still be truncated away.
Other callers (a replica id >= 0) may see up to the log end. A consumer at READ_COMMITTED
(isolation_level 1) is told offsets below the last stable offset instead (KIP-98).

KIP-207: right after a leader change the new leader's high watermark may still be below the
offset its epoch started at (the end of what the previous leader wrote, which the old high
watermark had not reached yet). Its `latest` would then be smaller than an offset a consumer
may already have seen, so a consumer asking for `latest`, or for a record past the high
watermark, gets OFFSET_NOT_AVAILABLE (LEADER_NOT_AVAILABLE before v5) and retries.
"""

from __future__ import annotations

from typing import NamedTuple

from kio.schema.errors import ErrorCode

from broker.log.leader_epoch import UNDEFINED_EPOCH

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
CONSUMER = -1  # the replica id of a client's request
FIRST_OFFSET_NOT_AVAILABLE = 5  # the first ListOffsets version that knows OFFSET_NOT_AVAILABLE


class Answer(NamedTuple):
    error: ErrorCode
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


NOTHING = Answer(ErrorCode.none)


def lookup(log, leader_epoch: int, epoch_start_offset: int | None, timestamp: int, replica_id: int,
           version: int, read_committed: bool = False) -> Answer:
    """The answer for `timestamp` (a time or one of the special values above) from `log`, led at
    `leader_epoch` since `epoch_start_offset` (None: not known, nothing lags)."""
    client = replica_id == CONSUMER
    hw = log.high_watermark
    last_fetchable = (log.last_stable_offset if read_committed else hw) if client else log.log_end_offset
    lagging = client and epoch_start_offset is not None and epoch_start_offset > hw
    unavailable = Answer(ErrorCode.offset_not_available if version >= FIRST_OFFSET_NOT_AVAILABLE
                         else ErrorCode.leader_not_available)
    if timestamp == LATEST:
        return unavailable if lagging else Answer(ErrorCode.none, -1, last_fetchable, leader_epoch)
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        start = log.log_start_offset
        return Answer(ErrorCode.none, -1, start, log.leader_epochs.epoch_for_offset(start))
    if timestamp == LATEST_TIERED:  # no tiered storage: nothing is remote
        found: tuple[int, int] | None = (-1, -1)
    elif timestamp == MAX_TIMESTAMP:
        found = log.max_timestamp()
        found = None if found[0] < 0 else found
    else:
        found = log.offset_for_timestamp(timestamp)
    if found is None or found[0] >= last_fetchable:
        return unavailable if lagging else NOTHING
    offset, ts = found
    return Answer(ErrorCode.none, ts, offset, log.leader_epochs.epoch_for_offset(offset) if offset >= 0
                  else UNDEFINED_EPOCH)
