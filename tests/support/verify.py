"""Read a topic back completely (confluent-kafka, no group) to compare with what was acknowledged."""

from __future__ import annotations

import time
from typing import Any, Sequence

from flotilla.testenv import kafka_wire
from tests.support.clients import ClientError, Rec, _s


def high_watermarks(bootstrap: str, topic: str, partitions: Sequence[int]) -> dict[int, int]:
    with kafka_wire.connect(bootstrap) as conn:
        return {p: conn.list_offsets(topic, p, -1) for p in partitions}


def read_all(bootstrap: str, topic: str, partitions: Sequence[int] = (0,), timeout: float = 60) -> list[Rec]:
    """Every record from offset 0 to the high watermark of each partition, in offset order.

    Fails (bounded) if the log cannot be read up to the high watermark, e.g. if a corrupt
    batch stops the consumer.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    ends = high_watermarks(bootstrap, topic, partitions)
    got: dict[int, list[Rec]] = {p: [] for p in partitions}
    pending = {p for p, end in ends.items() if end > 0}
    if not pending:
        return []
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "verify-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "check.crcs": True,
            "socket.timeout.ms": 10000,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise ClientError(
                    f"read_all {topic}: timed out; high watermarks {ends}, read "
                    f"{ {p: len(v) for p, v in got.items()} }"
                )
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= ends[msg.partition()]:
                        pending.discard(msg.partition())
                    continue
                raise ClientError(f"read_all {topic}: {msg.error()}")
            got[msg.partition()].append(Rec(msg.partition(), msg.offset(), _s(msg.key()), _s(msg.value())))
            if msg.offset() + 1 >= ends[msg.partition()]:
                pending.discard(msg.partition())
    finally:
        c.close()
    return [r for p in partitions for r in got[p]]


def read_all_raw(bootstrap: str, topic: str, partition: int = 0, timeout: float = 30) -> list[Any]:
    """confluent-kafka Message objects of one partition up to its high watermark (keys, values and
    headers as bytes, exactly as stored)."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    end = high_watermarks(bootstrap, topic, (partition,))[partition]
    out: list[Any] = []
    if end == 0:
        return out
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "verify-unused", "enable.auto.commit": False})
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while not out or out[-1].offset() + 1 < end:
            if time.monotonic() > deadline:
                raise ClientError(f"read_all_raw {topic}-{partition}: {len(out)} of {end} records in {timeout}s")
            msg = c.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise ClientError(f"read_all_raw {topic}: {msg.error()}")
            out.append(msg)
    finally:
        c.close()
    return out
