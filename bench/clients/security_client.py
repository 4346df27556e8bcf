"""The librdkafka (confluent-kafka) client of `python -m bench security`, run as a child process so
the harness never shares an interpreter with the client it times. Phases are bounded by time, not
by a record count, so a short run stays short whatever the broker's speed:

    python -m bench.clients.security_client produce CONF_JSON TOPIC SECONDS SIZE
    python -m bench.clients.security_client consume CONF_JSON TOPIC SECONDS GROUP

CONF_JSON is the librdkafka connection settings (bootstrap, security protocol, SASL, CA file); the
workload settings below are the same for every target and transport. Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from bench.clients.child_answer import answer

PRODUCER = {"acks": "1", "linger.ms": 5, "batch.size": 65536, "compression.type": "none",
            "enable.idempotence": False, "delivery.report.only.error": True}
CONSUMER = {"auto.offset.reset": "earliest", "enable.auto.commit": False, "fetch.max.bytes": 52428800}


def produce(args: argparse.Namespace) -> dict:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({**json.loads(args.conf), **PRODUCER,
                  "on_delivery": lambda err, msg: errors.append(str(err)) if err else None,
                  "error_cb": lambda e: errors.append(f"client error: {e}") if e.fatal() else None})
    p.list_topics(args.topic, timeout=30)  # connection, authentication and metadata: not timed
    payload = os.urandom(args.size)
    sent = 0
    t0 = time.perf_counter()
    deadline = t0 + args.seconds
    while time.perf_counter() < deadline and not errors:
        for _ in range(1000):
            try:
                p.produce(args.topic, payload)
            except BufferError:
                p.poll(0.005)
                break
            sent += 1
        p.poll(0)
    left = p.flush(120)
    elapsed = time.perf_counter() - t0
    if errors or left:
        raise RuntimeError(f"{len(errors)} errors ({errors[:3]}), {left} records not delivered")
    return {"records": sent, "bytes": sent * args.size, "seconds": elapsed}


def consume(args: argparse.Namespace) -> dict:
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    c = Consumer({**json.loads(args.conf), **CONSUMER, "group.id": args.group})
    meta = c.list_topics(args.topic, timeout=30)
    parts = [TopicPartition(args.topic, p, 0) for p in meta.topics[args.topic].partitions]
    ends = {tp.partition: c.get_watermark_offsets(tp, timeout=30)[1] for tp in parts}
    c.assign(parts)
    total = sum(ends.values())
    got = size = 0
    t0 = time.perf_counter()
    deadline = t0 + args.seconds
    while got < total and time.perf_counter() < deadline:
        for m in c.consume(1000, 1.0):
            if m.error():
                raise KafkaException(m.error())
            got += 1
            size += len(m.value())
    elapsed = time.perf_counter() - t0
    c.close()
    if not got:
        raise RuntimeError(f"read nothing of {total} records in {args.seconds} s")
    return {"records": got, "bytes": size, "seconds": elapsed, "log_records": total}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="bench.clients.security_client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    pr = sub.add_parser("produce")
    pr.add_argument("conf")
    pr.add_argument("topic")
    pr.add_argument("seconds", type=float)
    pr.add_argument("size", type=int)
    co = sub.add_parser("consume")
    co.add_argument("conf")
    co.add_argument("topic")
    co.add_argument("seconds", type=float)
    co.add_argument("group")
    args = ap.parse_args(argv)
    return answer(produce if args.cmd == "produce" else consume, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
