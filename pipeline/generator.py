"""The event generator: writes `events.make_event` records to the raw topic with a Kafka producer.

The producer is idempotent (acks=all, retries without duplicates), so the raw topic holds each
event exactly once: the checks downstream can count on it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from pipeline.events import GeneratorSettings, make_event


@dataclass
class GenerateSummary:
    first: int
    count: int
    malformed: int
    seconds: float

    def line(self) -> str:
        rate = self.count / self.seconds if self.seconds > 0 else float("inf")
        return (f"generated events {self.first}..{self.first + self.count - 1}: {self.count} records"
                f" ({self.malformed} malformed) in {self.seconds:.2f}s, {rate:,.0f} events/s")


def generate(bootstrap: str, topic: str, settings: GeneratorSettings, first: int, count: int,
             rate: float = 0.0, timeout: float = 60.0) -> GenerateSummary:
    """Write events first..first+count-1; `rate` > 0 paces them (events per second)."""
    from confluent_kafka import Producer

    errors: list[str] = []

    def on_delivery(err, _msg) -> None:
        if err is not None:
            errors.append(err.str())

    producer = Producer({
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "client.id": "flotilla-pipeline-generator",
    })
    malformed = 0
    t0 = time.monotonic()
    for n, index in enumerate(range(first, first + count)):
        event = make_event(settings, index)
        malformed += event.malformed is not None
        while True:
            try:
                producer.produce(topic, key=event.key, value=event.value, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
        if rate > 0:
            ahead = t0 + (n + 1) / rate - time.monotonic()
            if ahead > 0:
                producer.poll(ahead)
    left = producer.flush(timeout)
    if left or errors:
        raise RuntimeError(f"generator: {left} events undelivered, errors: {errors[:5]}")
    return GenerateSummary(first, count, malformed, time.monotonic() - t0)
