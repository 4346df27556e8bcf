"""Client processes of the `catch-up` bench case (bench/workloads/catchup.py), one per run, so that the
consumer's CPU time is its own (a child's getrusage) and no run shares an interpreter with another.

    python -m bench.clients.catchup_client restart BOOTSTRAP TOPIC --mode plain|parallel --rate 2000
    python -m bench.clients.catchup_client read BOOTSTRAP TOPIC RECORDS --mode plain|off
    python -m bench.clients.catchup_client steady BOOTSTRAP TOPIC --rate 2000      (started by `restart`)

`restart` plays a consumer that crashed with offset 0 committed and restarts with the whole topic
behind it, while a steady producer (`steady`, a process of its own) keeps writing. It reports the
age of the records written after the restart when they are delivered, the time until the backlog
(everything below the log end at the restart) is delivered, and its own CPU time. `read` times a
consumer in a fresh group reading a warm topic: a plain `confluent_kafka.Consumer` or a
`CatchUpConsumer` with the mode off. Each prints one JSON object as its last stdout line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import signal
import subprocess
import sys
import time
import uuid

from bench.clients.child_answer import answer


def _cpu() -> float:
    """CPU seconds of this process so far, every thread (librdkafka's included)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def steady(args: argparse.Namespace) -> dict:
    """Records of `--size` bytes at `--rate` per second until SIGTERM; prints `ready` once its
    connection is up, and its counts at the end."""
    from confluent_kafka import Producer

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    errors: list[str] = []
    acked = [0]

    def delivered(err, _msg) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[0] += 1

    p = Producer({"bootstrap.servers": args.bootstrap, "acks": "1", "linger.ms": 5,
                  "compression.type": "none", "on_delivery": delivered})
    p.list_topics(args.topic, timeout=30)
    print("ready", flush=True)
    payload = os.urandom(args.size)
    t0, sent = time.monotonic(), 0
    while not stop:
        due = t0 + sent / args.rate
        wait = due - time.monotonic()
        if wait > 0:
            p.poll(min(wait, 0.002))
            continue
        p.produce(args.topic, payload)
        sent += 1
        p.poll(0)
    left = p.flush(args.timeout)
    secs = time.monotonic() - t0
    if left or errors:
        raise RuntimeError(f"{left} records not delivered, {len(errors)} errors, first: {errors[:3]}")
    return {"sent": sent, "acked": acked[0], "seconds": secs, "rate": sent / secs}


def _watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{uuid.uuid4().hex[:8]}"})
    try:
        parts = sorted(c.list_topics(topic, timeout=30).topics[topic].partitions)
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30, cached=False)[1] for p in parts}
    finally:
        c.close()


def restart(args: argparse.Namespace) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    from flotilla.catchup import CatchUpConsumer

    group = f"catchup-{args.mode}-{uuid.uuid4().hex[:8]}"
    parts = sorted(_watermarks(args.bootstrap, args.topic))
    # The crash: the group's last commit is offset 0 on every partition.
    c0 = Consumer({"bootstrap.servers": args.bootstrap, "group.id": group, "enable.auto.commit": False})
    c0.commit(offsets=[TopicPartition(args.topic, p, 0) for p in parts], asynchronous=False)
    c0.close()
    # Production is steady before the restart and goes on until the backlog is done.
    prod = subprocess.Popen([sys.executable, "-m", "bench.clients.catchup_client", "steady", args.bootstrap, args.topic,
                             "--rate", str(args.rate), "--size", str(args.size), "--timeout", "60"],
                            stdout=subprocess.PIPE, text=True)
    try:
        if prod.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the steady producer did not start (exit {prod.poll()})")
        time.sleep(args.lead)
        backlog_end = _watermarks(args.bootstrap, args.topic)  # E0: everything below is the backlog
        backlog_left = sum(backlog_end.values())
        seen_backlog = {p: bytearray(n) for p, n in backlog_end.items()}
        seen_fresh: dict[int, set[int]] = {p: set() for p in parts}
        fresh: list[tuple[int, float, bool]] = []  # (create timestamp ms, age ms at delivery, from the gap)
        duplicates = 0
        t_restart = time.time()
        cpu0 = _cpu()
        c = CatchUpConsumer({
            "bootstrap.servers": args.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.partition.eof": False, "enable.parallel.rebalance": args.mode == "parallel",
        })
        c.subscribe([args.topic])
        t_done = t_first_fresh = None
        final: dict[int, int] | None = None
        produced: dict = {}
        deadline = time.monotonic() + args.timeout
        poll, parallel = c.poll, args.mode == "parallel"
        while True:
            msg = poll(0.1)
            now = time.time()
            if msg is not None:
                if msg.error() is not None:
                    raise RuntimeError(f"consumer error: {msg.error()}")
                p, o = msg.partition(), msg.offset()
                if o < backlog_end[p]:
                    if seen_backlog[p][o]:
                        duplicates += 1
                    else:
                        seen_backlog[p][o] = 1
                        backlog_left -= 1
                elif o in seen_fresh[p]:
                    duplicates += 1
                else:
                    seen_fresh[p].add(o)
                    ts = msg.timestamp()[1]
                    fresh.append((ts, now * 1000 - ts, parallel and c.last_source == "catchup"))
                    if t_first_fresh is None:
                        t_first_fresh = now
            if t_done is None and backlog_left == 0:
                t_done = now
                prod.send_signal(signal.SIGTERM)  # the producer stops; what it wrote must still arrive
            if t_done is not None and final is None and prod.poll() is not None:
                out = prod.stdout.read().strip().splitlines()
                if prod.returncode != 0 or not out:
                    raise RuntimeError(f"the steady producer failed (exit {prod.returncode})")
                produced = json.loads(out[-1])
                final = _watermarks(args.bootstrap, args.topic)
            if final is not None and all(len(seen_fresh[p]) >= final[p] - backlog_end[p] for p in parts):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not done within {args.timeout}s: {backlog_left} backlog records left,"
                                   f" {sum(len(s) for s in seen_fresh.values())} fresh delivered")
        t_end = time.time()
        cpu = _cpu() - cpu0
        metrics = c.metrics() if args.mode == "parallel" else {}
        worker = c.child_consumer_is_alive() if args.mode == "parallel" else False
        c.close()
    finally:
        if prod.poll() is None:
            prod.kill()
            prod.wait(10)
    assert t_done is not None
    # The fresh records that matter: written after the restart, while the backlog was still open.
    during = sorted(age for ts, age, _gap in fresh if ts <= t_done * 1000)
    every = sorted(age for _ts, age, _gap in fresh)
    delivered = sum(backlog_end.values()) + len(fresh)
    return {
        "mode": args.mode, "group": group, "backlog_records": sum(backlog_end.values()),
        "fresh_records": len(fresh), "fresh_during_backlog": len(during), "duplicates": duplicates,
        # written after the restart but before the group gave the partition back: part of the gap,
        # so the catch-up worker delivers them, after the older records of the gap
        "fresh_from_gap": sum(1 for _ts, _age, gap in fresh if gap),
        "rate": args.rate, "producer": produced,
        "backlog_seconds": t_done - t_restart,
        "first_fresh_seconds": None if t_first_fresh is None else t_first_fresh - t_restart,
        "fresh_age_p50_ms": _pct(during, 0.50), "fresh_age_p90_ms": _pct(during, 0.90),
        "fresh_age_p99_ms": _pct(during, 0.99),
        "fresh_age_max_ms": during[-1] if during else None,
        "fresh_age_all_p50_ms": _pct(every, 0.50), "fresh_age_all_p99_ms": _pct(every, 0.99),
        "seconds": t_end - t_restart, "consumer_cpu_seconds": cpu,
        "consumer_cpu_us_per_record": cpu / delivered * 1e6, "records_delivered": delivered,
        "catchup_worker_created": worker, "catchup_metrics": metrics,
    }


def read(args: argparse.Namespace) -> dict:
    """A fresh group reads RECORDS from the beginning with poll(): a plain Consumer or the mode off."""
    from confluent_kafka import Consumer

    from flotilla.catchup import CatchUpConsumer

    conf = {"bootstrap.servers": args.bootstrap, "group.id": f"read-{args.mode}-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest", "enable.partition.eof": False}
    c = Consumer(conf) if args.mode == "plain" else CatchUpConsumer(dict(conf, **{"enable.parallel.rebalance": False}))
    c.subscribe([args.topic])
    poll, n, got, nbytes = c.poll, args.records, 0, 0
    deadline = time.monotonic() + args.timeout
    while got == 0:  # the group join is not timed
        msg = poll(1.0)
        if msg is not None and msg.error() is None:
            got, nbytes = 1, len(msg)
        if time.monotonic() > deadline:
            raise RuntimeError(f"no record within {args.timeout}s")
    t0, cpu0 = time.perf_counter(), _cpu()
    while got < n:
        msg = poll(1.0)
        if msg is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"read {got} of {n} records within {args.timeout}s")
            continue
        if msg.error() is not None:
            raise RuntimeError(f"consumer error: {msg.error()}")
        got += 1
        nbytes += len(msg)
    secs, cpu = time.perf_counter() - t0, _cpu() - cpu0
    c.close()
    return {"mode": args.mode, "records": got, "seconds": secs, "records_per_sec": (got - 1) / secs,
            "mb_per_sec": nbytes / secs / (1024 * 1024), "consumer_cpu_seconds": cpu}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.clients.catchup_client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("restart")
    rp.add_argument("bootstrap")
    rp.add_argument("topic")
    rp.add_argument("--mode", choices=["plain", "parallel"], required=True)
    rp.add_argument("--rate", type=float, required=True, help="records per second of the steady producer")
    rp.add_argument("--size", type=int, default=100)
    rp.add_argument("--lead", type=float, default=1.0, help="seconds of steady production before the restart")
    rp.add_argument("--timeout", type=float, default=240)
    dp = sub.add_parser("read")
    dp.add_argument("bootstrap")
    dp.add_argument("topic")
    dp.add_argument("records", type=int)
    dp.add_argument("--mode", choices=["plain", "off"], required=True)
    dp.add_argument("--timeout", type=float, default=240)
    sp = sub.add_parser("steady")
    sp.add_argument("bootstrap")
    sp.add_argument("topic")
    sp.add_argument("--rate", type=float, required=True)
    sp.add_argument("--size", type=int, default=100)
    sp.add_argument("--timeout", type=float, default=60)
    args = ap.parse_args(argv)
    return answer({"restart": restart, "read": read, "steady": steady}[args.cmd], args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
