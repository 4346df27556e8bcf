"""Which topics a classic consumer group subscribes to, read from its members' ConsumerProtocol
subscriptions (Kafka's ClassicGroup.computeSubscribedTopics): OffsetDelete refuses to delete
offsets of a topic the active group consumes (GROUP_SUBSCRIBED_TO_TOPIC)."""

from __future__ import annotations

import struct
from typing import Iterable

CONSUMER_PROTOCOL_TYPE = "consumer"


def subscription_topics(metadata: bytes) -> list[str]:
    """The topics of one ConsumerProtocolSubscription (any version: the topic list comes first,
    right after the int16 version). Raises ValueError when the bytes are not one."""
    try:
        (version,) = struct.unpack_from(">h", metadata, 0)
        if version < 0:
            raise ValueError(f"subscription version {version}")
        (count,) = struct.unpack_from(">i", metadata, 2)
        pos, topics = 6, []
        for _ in range(max(count, 0)):
            (n,) = struct.unpack_from(">h", metadata, pos)
            if n < 0 or pos + 2 + n > len(metadata):
                raise ValueError("topic name out of bounds")
            topics.append(metadata[pos + 2:pos + 2 + n].decode())
            pos += 2 + n
        return topics
    except struct.error as e:
        raise ValueError(str(e)) from None


def subscribed_topics(protocol_type: str | None, member_metadata: Iterable[bytes]) -> set[str] | None:
    """The union of the members' subscriptions; None when unknown (not a consumer group, or a
    member's metadata does not parse), as Kafka's Optional.empty: then no topic counts as subscribed."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    out: set[str] = set()
    try:
        for metadata in member_metadata:
            out.update(subscription_topics(metadata))
    except ValueError:
        return None
    return out
