"""librdkafka (confluent-kafka) load generators, run as a child process so that the harness
(progress line, memory sampler) never shares an interpreter with the client being timed.

    python -m bench.rdkafka_client produce BOOTSTRAP TOPIC RECORDS SIZE --acks 1
    python -m bench.rdkafka_client consume BOOTSTRAP TOPIC RECORDS

Prints one JSON object on stdout; exits non-zero with a message on stderr on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid


def produce(args: argparse.Namespace) -> dict:
    from confluent_kafka import KafkaException, Producer

    errors: list[str] = []

    def on_error(err, msg) -> None:  # only failed deliveries are reported (see config)
        if len(errors) < 5:
            errors.append(str(err))
        else:
            errors.append("")

    p = Producer({
        "bootstrap.servers": args.bootstrap,
        "acks": args.acks,
        "linger.ms": args.linger_ms,
        "batch.size": args.batch_size,
        "compression.type": "none",
        "enable.idempotence": args.acks == "all",
        "delivery.report.only.error": True,
        "on_delivery": on_error,
        "error_cb": lambda e: errors.append(f"client error: {e}") if e.fatal() else None,
    })
    # Warm up: metadata and connection, outside the timing.
    p.list_topics(args.topic, timeout=30)
    payload = os.urandom(args.size)
    topic = args.topic
    n = args.records
    send = p.produce
    poll = p.poll
    t0 = time.perf_counter()
    for i in range(n):
        while True:
            try:
                send(topic, payload)
                break
            except BufferError:
                poll(0.001)
        if i & 1023 == 0:
            poll(0)
    left = p.flush(args.timeout)
    t1 = time.perf_counter()
    if left:
        raise KafkaException(f"{left} of {n} records not delivered within {args.timeout}s")
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {[e for e in errors if e][:5]}")
    secs = t1 - t0
    return {
        "records": n,
        "seconds": secs,
        "records_per_sec": n / secs,
        "mb_per_sec": n * args.size / secs / (1024 * 1024),
    }


def consume(args: argparse.Namespace) -> dict:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    c = Consumer({
        "bootstrap.servers": args.bootstrap,
        "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": False,
        **({"fetch.message.max.bytes": args.max_partition_fetch_bytes} if args.max_partition_fetch_bytes else {}),
    })
    md = c.list_topics(args.topic, timeout=30)
    parts = sorted(md.topics[args.topic].partitions)
    if not parts:
        raise RuntimeError(f"topic {args.topic} has no partitions in metadata")
    n = args.records
    got = 0
    nbytes = 0
    t0 = time.perf_counter()
    c.assign([TopicPartition(args.topic, p, OFFSET_BEGINNING) for p in parts])
    deadline = time.monotonic() + args.timeout
    consume_batch = c.consume
    while got < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"read {got} of {n} records within {args.timeout}s")
        for m in consume_batch(num_messages=10000, timeout=1.0):
            err = m.error()
            if err is not None:
                raise RuntimeError(f"consumer error: {err}")
            got += 1
            nbytes += len(m)
    t1 = time.perf_counter()
    c.close()
    secs = t1 - t0
    return {
        "records": got,
        "seconds": secs,
        "records_per_sec": got / secs,
        "mb_per_sec": nbytes / secs / (1024 * 1024),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.rdkafka_client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("produce")
    pp.add_argument("bootstrap")
    pp.add_argument("topic")
    pp.add_argument("records", type=int)
    pp.add_argument("size", type=int)
    pp.add_argument("--acks", default="1", choices=["0", "1", "all"])
    pp.add_argument("--batch-size", type=int, default=65536)
    pp.add_argument("--linger-ms", type=int, default=5)
    pp.add_argument("--timeout", type=float, default=120)
    cp = sub.add_parser("consume")
    cp.add_argument("bootstrap")
    cp.add_argument("topic")
    cp.add_argument("records", type=int)
    cp.add_argument("--timeout", type=float, default=120)
    cp.add_argument("--max-partition-fetch-bytes", type=int, default=0, help="small values: many fetches (warm-up)")
    args = ap.parse_args(argv)
    try:
        result = produce(args) if args.cmd == "produce" else consume(args)
    except Exception as e:  # reported to the harness, which records it
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        return 1
    import confluent_kafka

    v = confluent_kafka.version()
    result["client"] = f"confluent-kafka {v if isinstance(v, str) else v[0]} / librdkafka {confluent_kafka.libversion()[0]}"
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
