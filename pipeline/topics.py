"""The pipeline's topics, and creating them before anything writes to them.

Created explicitly (CreateTopics through the admin client) rather than left to auto-creation, so a
broker with `auto.create.topics.enable=false` works too and the raw topic gets its partitions.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

# Dead-letter headers: why the record was rejected and where it came from (Kafka Connect keeps the
# same facts in its `__connect.errors.*` headers). The key and value stay the raw record's own.
H_ERROR = "dlq.error"
H_TOPIC = "dlq.source.topic"
H_PARTITION = "dlq.source.partition"
H_OFFSET = "dlq.source.offset"


@dataclass(frozen=True)
class Topics:
    raw: str = "events"
    output: str = "event-aggregates"
    dead_letter: str = "events-dead-letter"
    raw_partitions: int = 3
    replication_factor: int = 1

    def all(self) -> list[tuple[str, int]]:
        return [(self.raw, self.raw_partitions), (self.output, 1), (self.dead_letter, 1)]


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def ensure_topics(bootstrap: str, topics: Topics, timeout: float = 30.0) -> None:
    """Create the missing topics and wait until each partition has a leader; existing ones stay."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    client = admin(bootstrap)
    wanted = topics.all()
    futures = client.create_topics(
        [NewTopic(name, partitions, topics.replication_factor) for name, partitions in wanted],
        operation_timeout=timeout,
    )
    for name, future in futures.items():
        try:
            future.result(timeout)
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise RuntimeError(f"creating topic {name!r} failed: {e.args[0].str()}") from None
    deadline = time.monotonic() + timeout
    while True:
        md = client.list_topics(timeout=timeout)
        missing = [
            name for name, _ in wanted
            if name not in md.topics or md.topics[name].error is not None
            or not md.topics[name].partitions
            or any(p.leader < 0 for p in md.topics[name].partitions.values())
        ]
        if not missing:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"topics without leaders after {timeout:.0f}s: {missing}")
        time.sleep(0.1)


def records_in(bootstrap: str, topic: str, timeout: float = 30.0) -> int:
    """How many records `topic` has ever had (sum of its partitions' end offsets); 0 if absent."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "flotilla-pipeline-sizer"})
    try:
        md = c.list_topics(topic, timeout=timeout)
        if topic not in md.topics or md.topics[topic].error is not None:
            return 0
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                   for p in md.topics[topic].partitions)
    finally:
        c.close()


def end_offsets(bootstrap: str, topic: str, timeout: float = 30.0) -> dict[int, int]:
    """Each partition's log end offset (the next offset to be written) at the time of the call."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "flotilla-pipeline-sizer"})
    try:
        md = c.list_topics(topic, timeout=timeout)
        if topic not in md.topics or md.topics[topic].error is not None:
            raise RuntimeError(f"topic {topic!r} not found")
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in sorted(md.topics[topic].partitions)}
    finally:
        c.close()
