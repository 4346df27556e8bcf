"""librdkafka (confluent-kafka) load generators, run as a child process so that the harness
(progress line, memory sampler) never shares an interpreter with the client being timed.

    python -m bench.clients.rdkafka_client produce BOOTSTRAP TOPIC RECORDS SIZE --acks 1
    python -m bench.clients.rdkafka_client consume BOOTSTRAP TOPIC RECORDS
    python -m bench.clients.rdkafka_client latency BOOTSTRAP TOPIC RECORDS SIZE --rate 5000
    python -m bench.clients.rdkafka_client txn-produce BOOTSTRAP TOPIC TRANSACTIONS SIZE --per-txn 100
    python -m bench.clients.rdkafka_client txn-latency BOOTSTRAP TOPIC TRANSACTIONS SIZE --per-txn 100 --rate 10

Prints one JSON object on stdout; exits non-zero with a message on stderr on failure.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid

from bench.clients.child_answer import answer


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
        **({"batch.num.messages": args.batch_num_messages} if args.batch_num_messages else {}),
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


def latency(args: argparse.Namespace) -> dict:
    """Records sent at a fixed rate, one per batch; send-to-acknowledgement time of each (the send
    time travels in the record's key, so the delivery callback needs no lookup)."""
    import struct

    from confluent_kafka import Producer

    pack, unpack, now = struct.Struct(">d").pack, struct.Struct(">d").unpack, time.perf_counter
    latencies: list[float] = []
    errors: list[str] = []

    def delivered(err, msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            latencies.append(now() - unpack(msg.key())[0])

    p = Producer({
        "bootstrap.servers": args.bootstrap, "acks": args.acks, "linger.ms": 0, "batch.num.messages": 1,
        "compression.type": "none", "on_delivery": delivered,
    })
    p.list_topics(args.topic, timeout=30)
    payload = os.urandom(args.size)
    n, rate, topic = args.records, args.rate, args.topic
    t0 = now()
    for i in range(n):
        due = t0 + i / rate
        while True:
            p.poll(0)
            wait = due - now()
            if wait <= 0:
                break
            time.sleep(min(wait, 0.0005))
        p.produce(topic, payload, key=pack(now()))
    left = p.flush(args.timeout)
    secs = now() - t0
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, {len(errors)} errors, first: {errors[:3]}")
    latencies.sort()

    def pct(q: float) -> float:
        return latencies[min(len(latencies) - 1, int(q * len(latencies)))] * 1000

    return {
        "records": n, "seconds": secs, "records_per_sec": n / secs, "target_rate": rate,
        "latency_p50_ms": pct(0.50), "latency_p99_ms": pct(0.99), "latency_p999_ms": pct(0.999),
        "latency_max_ms": latencies[-1] * 1000,
    }


def _txn_producer(args: argparse.Namespace):
    from confluent_kafka import Producer

    p = Producer({
        "bootstrap.servers": args.bootstrap, "transactional.id": f"bench-{uuid.uuid4().hex[:8]}",
        "linger.ms": args.linger_ms, "batch.size": 65536, "compression.type": "none",
    })
    p.init_transactions(30)  # coordinator lookup, producer id: outside the timing
    p.list_topics(args.topic, timeout=30)
    return p


def _pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def txn_produce(args: argparse.Namespace) -> dict:
    """Transactions of `per_txn` records as fast as one transactional producer can commit them."""
    p = _txn_producer(args)
    payload = os.urandom(args.size)
    commits: list[float] = []
    t0 = time.perf_counter()
    for _ in range(args.records):
        p.begin_transaction()
        for _ in range(args.per_txn):
            while True:
                try:
                    p.produce(args.topic, payload)
                    break
                except BufferError:
                    p.poll(0.001)
        c0 = time.perf_counter()
        p.commit_transaction(args.timeout)  # flushes, then EndTxn: returns once the commit is written
        commits.append(time.perf_counter() - c0)
    secs = time.perf_counter() - t0
    n = args.records * args.per_txn
    commits.sort()
    return {"transactions": args.records, "records": n, "seconds": secs, "txn_per_sec": args.records / secs,
            "records_per_sec": n / secs, "mb_per_sec": n * args.size / secs / (1024 * 1024),
            "commit_p50_ms": _pct(commits, 0.5), "commit_p99_ms": _pct(commits, 0.99)}


def txn_latency(args: argparse.Namespace) -> dict:
    """Transactions of `per_txn` records started at a fixed rate and committed; a read_committed
    consumer in this process reads them. Latency of a record: from its send to its arrival at the
    consumer, so it includes the wait for the commit and for the last stable offset to pass it
    (the send time travels in the first 8 bytes of the value)."""
    import struct
    import threading

    from confluent_kafka import Consumer, TopicPartition

    pack, unpack, now = struct.Struct(">d").pack, struct.Struct(">d").unpack_from, time.perf_counter
    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": "read_committed", "fetch.wait.max.ms": 100})
    parts = sorted(c.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    c.assign([TopicPartition(args.topic, q, 0) for q in parts])  # a fresh topic: from offset 0
    n = args.records * args.per_txn
    latencies: list[float] = []
    errors: list[str] = []
    done = threading.Event()

    def read() -> None:
        while len(latencies) < n and not done.is_set():
            for m in c.consume(num_messages=1000, timeout=0.1):
                if m.error() is not None:
                    errors.append(str(m.error()))
                    continue
                latencies.append(now() - unpack(m.value())[0])

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    p = _txn_producer(args)
    filler = os.urandom(max(0, args.size - 8))
    t0 = now()
    for t in range(args.records):
        wait = t0 + t / args.rate - now()
        if wait > 0:
            time.sleep(wait)
        p.begin_transaction()
        for _ in range(args.per_txn):
            p.produce(args.topic, pack(now()) + filler)
        p.commit_transaction(args.timeout)
    secs = now() - t0
    reader.join(args.timeout)
    done.set()
    c.close()
    if len(latencies) < n:
        raise RuntimeError(f"the read_committed consumer read {len(latencies)} of {n} records; errors: {errors[:3]}")
    latencies.sort()
    return {"transactions": args.records, "records": n, "seconds": secs, "target_txn_rate": args.rate,
            "records_per_sec": n / secs, "latency_p50_ms": _pct(latencies, 0.5),
            "latency_p99_ms": _pct(latencies, 0.99), "latency_p999_ms": _pct(latencies, 0.999),
            "latency_max_ms": latencies[-1] * 1000}


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
    ap = argparse.ArgumentParser(prog="python -m bench.clients.rdkafka_client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("produce")
    pp.add_argument("bootstrap")
    pp.add_argument("topic")
    pp.add_argument("records", type=int)
    pp.add_argument("size", type=int)
    pp.add_argument("--acks", default="1", choices=["0", "1", "all"])
    pp.add_argument("--batch-size", type=int, default=65536)
    pp.add_argument("--linger-ms", type=int, default=5)
    pp.add_argument("--batch-num-messages", type=int, default=0, help="1: one record per batch (small batches)")
    pp.add_argument("--timeout", type=float, default=120)
    cp = sub.add_parser("consume")
    cp.add_argument("bootstrap")
    cp.add_argument("topic")
    cp.add_argument("records", type=int)
    cp.add_argument("--timeout", type=float, default=120)
    cp.add_argument("--max-partition-fetch-bytes", type=int, default=0, help="small values: many fetches (warm-up)")
    lp = sub.add_parser("latency")
    lp.add_argument("bootstrap")
    lp.add_argument("topic")
    lp.add_argument("records", type=int)
    lp.add_argument("size", type=int)
    lp.add_argument("--rate", type=float, required=True, help="records per second")
    lp.add_argument("--acks", default="1", choices=["0", "1", "all"])
    lp.add_argument("--timeout", type=float, default=120)
    for name, rate in (("txn-produce", False), ("txn-latency", True)):
        tp = sub.add_parser(name)
        tp.add_argument("bootstrap")
        tp.add_argument("topic")
        tp.add_argument("records", type=int, help="transactions")
        tp.add_argument("size", type=int)
        tp.add_argument("--per-txn", type=int, default=100, help="records per transaction")
        tp.add_argument("--linger-ms", type=int, default=5)
        tp.add_argument("--timeout", type=float, default=120)
        if rate:
            tp.add_argument("--rate", type=float, required=True, help="transactions per second")
    args = ap.parse_args(argv)
    command = {"produce": produce, "consume": consume, "latency": latency, "txn-produce": txn_produce,
               "txn-latency": txn_latency}[args.cmd]

    def run(args: argparse.Namespace) -> dict:
        import confluent_kafka

        result = command(args)
        v = confluent_kafka.version()
        result["client"] = f"confluent-kafka {v if isinstance(v, str) else v[0]} / librdkafka {confluent_kafka.libversion()[0]}"
        return result

    return answer(run, args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
