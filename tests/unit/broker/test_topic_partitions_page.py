"""KIP-966 pages as Kafka's KRaftMetadataCache.describeTopicResponse cuts them, and the
subscriptions OffsetDelete reads from a consumer group's members."""

import struct
import uuid

from kio.schema.errors import ErrorCode

from broker.coordinator.group.subscriptions import subscribed_topics, subscription_topics
from broker.metadata.store import BrokerRegistration, MetadataImage, PartitionState, TopicRecord
from broker.apis.topic_partitions_page import page


def image(**topics: int) -> MetadataImage:
    brokers = {1: BrokerRegistration(1, "x", ())}
    recs = {name: TopicRecord(name, uuid.uuid4(), n, 1, {}, tuple(PartitionState(1, 0, (1, 2), (1,)) for _ in range(n)))
            for name, n in topics.items()}
    return MetadataImage.build("c", brokers, 1, recs)


def rows(p):
    return [(t.name, r.index) for t in p.topics for r in t.partitions]


def unknown(_name):
    return ErrorCode.unknown_topic_or_partition


def test_pages_follow_the_cursor_across_topics():
    img = image(a=3, b=2)
    first = page(img, ["b", "a"], None, 2, False, unknown)
    assert rows(first) == [("a", 0), ("a", 1)] and first.next_cursor == ("a", 2)
    second = page(img, ["a", "b"], ("a", 2), 2, False, unknown)
    assert rows(second) == [("a", 2), ("b", 0)] and second.next_cursor == ("b", 1)
    last = page(img, ["b"], ("b", 1), 2, False, unknown)
    assert rows(last) == [("b", 1)] and last.next_cursor is None


def test_a_limit_ending_at_a_topic_end_points_at_the_next_topic():
    p = page(image(a=2, b=1), ["a", "b"], None, 2, True, unknown)
    assert rows(p) == [("a", 0), ("a", 1)] and p.next_cursor == ("b", 0)


def test_unknown_topics_are_reported_only_when_named_and_offline_replicas_listed():
    img = image(a=1)
    named = page(img, ["a", "zz"], None, 10, False, unknown)
    assert [(t.name, t.error) for t in named.topics] == [("a", ErrorCode.none), ("zz", ErrorCode.unknown_topic_or_partition)]
    assert named.topics[0].partitions[0].offline == (2,)
    assert [t.name for t in page(img, ["a", "zz"], None, 10, True, unknown).topics] == ["a"]


def subscription(*topics: str, version: int = 1) -> bytes:
    body = struct.pack(">hi", version, len(topics))
    for t in topics:
        body += struct.pack(">h", len(t)) + t.encode()
    return body + struct.pack(">i", -1)  # v1+: user data (null) follows


def test_subscriptions_of_a_consumer_group():
    assert subscription_topics(subscription("a", "b")) == ["a", "b"]
    assert subscribed_topics("consumer", [subscription("a"), subscription("b", "c", version=3)]) == {"a", "b", "c"}
    assert subscribed_topics("connect", [subscription("a")]) is None
    assert subscribed_topics("consumer", [b"\x00"]) is None
