"""The client processes of the OMB-shaped fleet cases (bench/commands/omb.py): one librdkafka producer or
consumer per process, as OpenMessaging Benchmark runs one client per thread of its workers, so
that the four producers and four consumers do not share one interpreter. bench/commands/drain.py's steady
producer during a partition move is this producer too.

    python -m bench.clients.omb_client producer BOOTSTRAP TOPIC --id 0 --seconds 20 --rate 5000 --out DIR
    python -m bench.clients.omb_client producer ... --seconds 3600 --stop-file F   # until F exists (bench/commands/drain.py)
    python -m bench.clients.omb_client consumer BOOTSTRAP TOPIC --group G --stop-file F --out DIR
    python -m bench.clients.omb_client verify BOOTSTRAP TOPIC --acked DIR

Every record's value starts with its send time (CLOCK_MONOTONIC, shared by the processes of one
machine), the producer's sequence number and the producer's id; the rest is random bytes. The
producer writes, per acknowledged record, its send time, its send-to-acknowledgement latency and
its sequence; the consumer writes, per record, its arrival time and send-to-arrival latency. The
harness merges these files (raw samples, not per-process percentiles, so the percentiles are over
every record). Prints one JSON object on stdout (bench/clients/child_answer.py).
"""

from __future__ import annotations

import argparse
import os
import struct
import sys
import time
import uuid
from array import array
from pathlib import Path

from bench.clients.child_answer import answer

HEAD = struct.Struct(">dIH")  # send time, sequence, producer id
now = time.monotonic


def _payloads(size: int, count: int = 1000) -> list[bytes]:
    """A pool of random tails, as OMB's randomized payload pool: no two neighbours alike, so
    neither broker gains from repetition (no compression is used anyway)."""
    return [os.urandom(max(0, size - HEAD.size)) for _ in range(count)]


def _wait_until(t: float) -> None:
    while True:
        left = t - now()
        if left <= 0:
            return
        time.sleep(min(left, 0.05))


def producer(args: argparse.Namespace) -> dict:
    """Sends for `seconds` from `start_at` (or until `stop_file` exists), at `rate` records/s (0: as
    fast as it can), then flushes. Idempotent, acks=all; with `per_txn`, transactions of that many records, each
    committed before the next starts."""
    from confluent_kafka import KafkaException, Producer

    sent_at, lat, seqs = array("d"), array("d"), array("I")
    errors: list[str] = []
    nerrors = 0
    unpack = HEAD.unpack_from

    def delivered(err, msg) -> None:
        nonlocal nerrors
        if err is not None:
            nerrors += 1
            if len(errors) < 5:
                errors.append(str(err))
            return
        t, seq, _ = unpack(msg.value())
        sent_at.append(t)
        lat.append(now() - t)
        seqs.append(seq)

    conf = {
        "bootstrap.servers": args.bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": args.linger_ms, "batch.size": args.batch_size, "compression.type": "none",
        "on_delivery": delivered,
    }
    if args.per_txn:
        conf["transactional.id"] = f"omb-{args.id}-{uuid.uuid4().hex[:8]}"
    p = Producer(conf)
    if args.per_txn:
        p.init_transactions(60)
    p.list_topics(args.topic, timeout=30)
    tails = _payloads(args.size)
    ntails = len(tails)
    pack, topic, produce, poll, pid = HEAD.pack, args.topic, p.produce, p.poll, args.id
    per_txn = args.per_txn
    commits = array("d")
    _wait_until(args.start_at)
    t0 = now()
    end = t0 + args.seconds
    rate = args.rate
    stop = Path(args.stop_file) if args.stop_file else None
    next_check = t0
    seq = 0
    while True:
        t = now()
        if t >= end:
            break
        if stop is not None and t >= next_check:  # a harness that ends the load when it is done
            if stop.exists():
                break
            next_check = t + 0.05
        if per_txn:
            p.begin_transaction()
        for _ in range(per_txn or 1):
            if rate:
                due = t0 + seq / rate
                while True:
                    wait = due - now()
                    if wait <= 0:
                        break
                    poll(min(wait, 0.001))
            while True:
                try:
                    produce(topic, pack(now(), seq, pid) + tails[seq % ntails])
                    break
                except BufferError:
                    poll(0.001)
            seq += 1
            if seq & 255 == 0:
                poll(0)
        if per_txn:
            c0 = now()
            p.commit_transaction(args.timeout)
            commits.append(now() - c0)
    sending = now() - t0
    left = p.flush(args.timeout)
    secs = now() - t0
    out = Path(args.out)
    (out / f"producer-{pid}.sent").write_bytes(sent_at.tobytes())
    (out / f"producer-{pid}.lat").write_bytes(lat.tobytes())
    (out / f"producer-{pid}.acked").write_bytes(seqs.tobytes())
    if left and not args.tolerate_errors:
        raise KafkaException(f"{left} of {seq} records not delivered within {args.timeout}s")
    if nerrors and not args.tolerate_errors:
        raise RuntimeError(f"{nerrors} delivery errors, first: {errors}")
    commits_sorted = sorted(commits)
    return {"id": pid, "sent": seq, "acked": len(seqs), "errors": nerrors, "first_errors": errors,
            "undelivered": left, "sending_seconds": sending, "seconds": secs, "start": t0,
            "transactions": len(commits),
            "commit_p50_ms": commits_sorted[len(commits_sorted) // 2] * 1000 if commits_sorted else None,
            "commit_p99_ms": commits_sorted[int(0.99 * (len(commits_sorted) - 1))] * 1000 if commits_sorted else None}


def consumer(args: argparse.Namespace) -> dict:
    """A member of the group: reads until the stop file exists and nothing arrived for `idle`
    seconds. Writes its assignment size to `<out>/consumer-<id>.assigned` on every rebalance, so
    the harness starts the producers only once the group covers every partition."""
    from confluent_kafka import Consumer

    out = Path(args.out)
    assigned_file = out / f"consumer-{args.id}.assigned"
    assigned_file.write_text("0")

    def on_assign(c, parts) -> None:
        assigned_file.write_text(str(len(parts)))

    def on_revoke(c, parts) -> None:
        assigned_file.write_text("0")

    c = Consumer({
        "bootstrap.servers": args.bootstrap, "group.id": args.group, "auto.offset.reset": "earliest",
        "enable.auto.commit": False, "max.partition.fetch.bytes": 10 * 1024 * 1024,
        "isolation.level": args.isolation, "fetch.wait.max.ms": args.fetch_wait_ms,
    })
    c.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    arrived, lat = array("d"), array("d")
    unpack = HEAD.unpack_from
    stop = Path(args.stop_file)
    last_data = now()
    last_commit = now()
    deadline = now() + args.timeout
    errors: list[str] = []
    consume = c.consume
    while now() < deadline:
        msgs = consume(num_messages=1000, timeout=0.1)
        t = now()
        for m in msgs:
            if m.error() is not None:
                if len(errors) < 5:
                    errors.append(str(m.error()))
                continue
            arrived.append(t)
            lat.append(t - unpack(m.value())[0])
        if msgs:
            last_data = t
        if t - last_commit > 1.0 and arrived:
            try:
                c.commit(asynchronous=True)  # as OMB's consumer: offsets committed, not waited for
            except Exception:
                pass
            last_commit = t
        if not msgs and t - last_data > args.idle and stop.exists():
            break
    c.close()
    (out / f"consumer-{args.id}.arrived").write_bytes(arrived.tobytes())
    (out / f"consumer-{args.id}.lat").write_bytes(lat.tobytes())
    return {"id": args.id, "records": len(arrived), "errors": errors, "timed_out": now() >= deadline}


def verify(args: argparse.Namespace) -> dict:
    """Reads the whole topic (read_committed when asked) from the beginning up to every
    partition's high watermark and compares the (producer, sequence) pairs with the producers'
    acknowledged ones: an acknowledged record missing from the log is lost."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": args.bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False, "isolation.level": args.isolation,
                  "max.partition.fetch.bytes": 10 * 1024 * 1024})
    parts = sorted(c.list_topics(args.topic, timeout=30).topics[args.topic].partitions)
    ends = {}
    for q in parts:
        lo, hi = c.get_watermark_offsets(TopicPartition(args.topic, q), timeout=30)
        ends[q] = hi
    c.assign([TopicPartition(args.topic, q, 0) for q in parts if ends[q] > 0])
    left = {q for q in parts if ends[q] > 0}
    seen: set[tuple[int, int]] = set()
    read = 0
    deadline = now() + args.timeout
    while left and now() < deadline:
        for m in c.consume(num_messages=5000, timeout=0.5):
            if m.error() is not None:
                continue
            read += 1
            _, seq, pid = HEAD.unpack_from(m.value())
            seen.add((pid, seq))
            if m.offset() + 1 >= ends[m.partition()]:
                left.discard(m.partition())
        # read_committed stops at the last stable offset; aborted or control records below the
        # high watermark are never delivered, so a partition with nothing more to give is done.
        for q in list(left):
            pos = c.position([TopicPartition(args.topic, q)])[0].offset
            if pos >= ends[q]:
                left.discard(q)
    c.close()
    acked = 0
    lost = 0
    for f in sorted(Path(args.acked).glob("producer-*.acked")):
        pid = int(f.name.split("-")[1].split(".")[0])
        seqs = array("I")
        seqs.frombytes(f.read_bytes())
        acked += len(seqs)
        lost += sum(1 for s in seqs if (pid, s) not in seen)
    return {"records_read": read, "distinct": len(seen), "duplicates": read - len(seen), "acked": acked,
            "lost": lost, "partitions_unfinished": sorted(left)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.clients.omb_client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    pp = sub.add_parser("producer")
    pp.add_argument("bootstrap")
    pp.add_argument("topic")
    pp.add_argument("--id", type=int, required=True)
    pp.add_argument("--seconds", type=float, required=True)
    pp.add_argument("--rate", type=float, default=0, help="records/s of this producer (0: as fast as it can)")
    pp.add_argument("--start-at", type=float, default=0, help="CLOCK_MONOTONIC time to start sending")
    pp.add_argument("--size", type=int, default=1024)
    pp.add_argument("--linger-ms", type=int, default=1)
    pp.add_argument("--batch-size", type=int, default=1048576)
    pp.add_argument("--per-txn", type=int, default=0, help="records per transaction (0: not transactional)")
    pp.add_argument("--tolerate-errors", action="store_true", help="report failed deliveries instead of failing")
    pp.add_argument("--stop-file", default=None, help="stop sending once this file exists (before --seconds)")
    pp.add_argument("--timeout", type=float, default=120)
    pp.add_argument("--out", required=True)
    cp = sub.add_parser("consumer")
    cp.add_argument("bootstrap")
    cp.add_argument("topic")
    cp.add_argument("--id", type=int, required=True)
    cp.add_argument("--group", required=True)
    cp.add_argument("--stop-file", required=True)
    cp.add_argument("--idle", type=float, default=2.0)
    cp.add_argument("--isolation", default="read_uncommitted", choices=["read_uncommitted", "read_committed"])
    cp.add_argument("--fetch-wait-ms", type=int, default=500)
    cp.add_argument("--timeout", type=float, default=600)
    cp.add_argument("--out", required=True)
    vp = sub.add_parser("verify")
    vp.add_argument("bootstrap")
    vp.add_argument("topic")
    vp.add_argument("--acked", required=True, help="directory of the producers' .acked files")
    vp.add_argument("--isolation", default="read_uncommitted", choices=["read_uncommitted", "read_committed"])
    vp.add_argument("--timeout", type=float, default=300)
    args = ap.parse_args(argv)
    return answer({"producer": producer, "consumer": consumer, "verify": verify}[args.cmd], args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
