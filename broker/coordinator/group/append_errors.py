"""How a failed replicated write to `__consumer_offsets` is told to a group client.

Kafka's group coordinator writes every record (offsets, group metadata, tombstones) with
acks=all and answers once the in-sync replicas hold it; a write that fails answers with a
coordinator error the clients know how to retry (GroupCoordinatorService's mapping), not with
the produce error underneath.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

_MAPPED = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def coordinator_error(code: ErrorCode) -> ErrorCode:
    """The error a group client gets for a write to `__consumer_offsets` that ended in `code`."""
    return _MAPPED.get(code, code)
