"""Reading the pipeline's output topics the way their readers must.

The Kafka sink is at-least-once: after a crash, the re-run micro-batch may write rows a second
time. The rows are identical copies (same key, same value), so a reader that keeps the latest row
per key (`latest_per_key`) sees each output row exactly once. Dead letters carry their source
coordinates in headers, so a reader de-duplicates them by (topic, partition, offset).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pipeline.topics import H_ERROR, H_OFFSET, H_PARTITION, H_TOPIC


@dataclass(frozen=True)
class Record:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k == name:
                return v.decode() if v is not None else None
        return None


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Record]:
    """Every record in `topic` up to its end offsets at the time of the call, in offset order."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": "flotilla-pipeline-reader",  # assign() only: nothing is committed
        "enable.auto.commit": False,
        "enable.partition.eof": True,
    })
    try:
        md = consumer.list_topics(topic, timeout=timeout)
        if topic not in md.topics or md.topics[topic].error is not None:
            raise RuntimeError(f"topic {topic!r} not found")
        ends = {}
        for p in md.topics[topic].partitions:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
            if high > low:
                ends[p] = (low, high)
        consumer.assign([TopicPartition(topic, p, low) for p, (low, _) in ends.items()])
        out: list[Record] = []
        remaining = {p for p in ends}
        deadline = time.monotonic() + timeout
        while remaining:
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: partitions {sorted(remaining)} not read to the end")
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                continue  # partition EOF notices
            p, off = msg.partition(), msg.offset()
            if p in remaining and off < ends[p][1]:
                out.append(Record(p, off, msg.key(), msg.value(), tuple(msg.headers() or ())))
            if p in remaining and off >= ends[p][1] - 1:
                remaining.discard(p)
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def latest_per_key(records: list[Record]) -> dict[str, str]:
    """Output key -> value of its latest row (rows of one partition are in offset order)."""
    latest: dict[str, str] = {}
    for r in records:
        latest[(r.key or b"").decode()] = (r.value or b"").decode()
    return latest


def dead_letters_by_source(records: list[Record]) -> dict[tuple[str, int, int], Record]:
    """Dead letters keyed by the raw record they came from; repeated copies collapse into one."""
    out: dict[tuple[str, int, int], Record] = {}
    for r in records:
        source = (r.header(H_TOPIC) or "", int(r.header(H_PARTITION) or -1), int(r.header(H_OFFSET) or -1))
        out[source] = r
    return out


def reason(record: Record) -> str | None:
    return record.header(H_ERROR)
