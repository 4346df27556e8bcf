"""A client smoke test: produce one record and read it back, through a bootstrap address.

    python -m flotilla.smoke --bootstrap-server demo-bootstrap.kafka.svc:9092

What the Helm chart's `helm test` Pod runs (charts/flotilla/templates/tests/), and what a user
runs by hand after an install (docs/operations.md). Creates the topic if it is missing, with the
cluster's default replication factor (-1), so acks=all meets min.insync.replicas; exits 0 only
when the very record it produced (a fresh value) comes back, and says what failed otherwise.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid

DEFAULT_TOPIC = "flotilla-smoke"


class _Errors:
    """librdkafka's client errors (connection refused, name not resolved), kept for the failure
    message instead of being logged line by line."""

    def __init__(self) -> None:
        self.last: str | None = None

    def config(self, bootstrap: str) -> dict:
        return {"bootstrap.servers": bootstrap, "log_level": 0, "error_cb": self.record}

    def record(self, err: object) -> None:
        self.last = str(err)

    def why(self) -> str:
        return f" (last client error: {self.last})" if self.last else ""


def _create_topic(errors: _Errors, bootstrap: str, topic: str, timeout: float) -> None:
    from concurrent.futures import TimeoutError as FutureTimeout

    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(errors.config(bootstrap))
    futures = admin.create_topics([NewTopic(topic, num_partitions=1, replication_factor=-1)],
                                  request_timeout=timeout)
    try:
        futures[topic].result(timeout)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise RuntimeError(f"creating topic {topic} through {bootstrap}: {exc}") from None
    except FutureTimeout:
        raise RuntimeError(f"creating topic {topic} through {bootstrap}: no answer within {timeout:.0f}s"
                           f"{errors.why()}") from None


def round_trip(bootstrap: str, topic: str = DEFAULT_TOPIC, timeout: float = 60.0) -> str:
    """Produce one fresh value with acks=all and consume until it is read; returns the value.
    Raises RuntimeError saying which step failed."""
    from confluent_kafka import Consumer, Producer

    deadline = time.monotonic() + timeout
    errors = _Errors()
    _create_topic(errors, bootstrap, topic, timeout)
    value = f"flotilla-smoke-{uuid.uuid4()}"
    delivered: list[object] = []
    producer = Producer({**errors.config(bootstrap), "acks": "all", "message.timeout.ms": int(timeout * 1000)})
    producer.produce(topic, value=value.encode(), on_delivery=lambda err, msg: delivered.append(err or msg))
    producer.flush(timeout)
    if not delivered or not hasattr(delivered[0], "offset"):
        raise RuntimeError(f"producing to {topic} through {bootstrap}: "
                           f"{delivered[0] if delivered else 'no delivery report'}{errors.why()}")
    offset = delivered[0].offset()  # type: ignore[union-attr]
    consumer = Consumer({**errors.config(bootstrap), "group.id": f"flotilla-smoke-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.subscribe([topic])
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            if msg.error():
                raise RuntimeError(f"consuming {topic} through {bootstrap}: {msg.error()}")
            if msg.value() == value.encode():
                return value
        raise RuntimeError(f"record {value} (offset {offset} of {topic}) not read back within {timeout:.0f}s"
                           f"{errors.why()}")
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m flotilla.smoke", description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap-server", required=True, help="host:port, e.g. demo-bootstrap.kafka.svc:9092")
    parser.add_argument("--topic", default=DEFAULT_TOPIC)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole round trip")
    args = parser.parse_args(argv)
    try:
        value = round_trip(args.bootstrap_server, args.topic, args.timeout)
    except RuntimeError as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"OK: produced and consumed {value} on {args.topic} through {args.bootstrap_server}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
