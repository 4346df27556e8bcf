"""Raw Kafka-protocol load for what no client library times on its own, run as a child process:

    python -m bench.clients.wire_client create-topics BOOTSTRAP PREFIX COUNT   # untimed set-up, 500 a request
    python -m bench.clients.wire_client metadata BOOTSTRAP REQUESTS --min-topics N

`metadata` sends Metadata v12 for all topics, one request at a time, and times each from the
first byte sent to the last byte of the response read; responses are not decoded (a Python
decoder would take longer than the broker), except the last one, which must list N topics.
Prints one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

from bench.clients.child_answer import answer

PER_REQUEST = 500


def create_topics(args: argparse.Namespace) -> dict:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    from kio.static.primitive import i16, i32

    from flotilla.testenv import kafka_wire

    t0 = time.perf_counter()
    names = [f"{args.prefix}-{i:06d}" for i in range(args.count)]
    with kafka_wire.connect(args.bootstrap, timeout=args.timeout) as conn:
        for start in range(0, len(names), PER_REQUEST):
            chunk = names[start:start + PER_REQUEST]
            resp = conn.request(CreateTopicsRequest(
                topics=tuple(CreatableTopic(name=n, num_partitions=i32(1), replication_factor=i16(1), assignments=(),
                                            configs=()) for n in chunk),
                timeout=datetime.timedelta(seconds=args.timeout), validate_only=False))
            bad = [(t.name, t.error_code) for t in resp.topics if int(t.error_code) != 0]
            if bad:
                raise RuntimeError(f"CreateTopics: {len(bad)} of {len(chunk)} failed, first {bad[:3]}")
        deadline = time.monotonic() + args.timeout
        while True:  # until metadata lists them all with leaders
            md = conn.metadata(None)
            ready = sum(1 for t in md.topics if t.name.startswith(args.prefix + "-") and int(t.error_code) == 0
                        and t.partitions and all(int(p.leader_id) >= 0 for p in t.partitions))
            if ready >= args.count:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {ready} of {args.count} topics have leaders after {args.timeout}s")
            time.sleep(1.0)
    return {"topics": args.count, "seconds": time.perf_counter() - t0}


def metadata(args: argparse.Namespace) -> dict:
    from kio.schema.metadata.v12.request import MetadataRequest
    from kio.schema.metadata.v12.response import MetadataResponse

    from flotilla.testenv import kafka_wire

    req = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    times: list[float] = []
    with kafka_wire.connect(args.bootstrap, timeout=args.timeout) as conn:
        frame = b""
        for _ in range(args.requests):
            t0 = time.perf_counter()
            conn.send(req)
            frame = conn.recv_frame()
            times.append(time.perf_counter() - t0)
    _, body_at = kafka_wire.decode(kafka_wire._response_header_type(MetadataResponse), frame)
    resp, _ = kafka_wire.decode(MetadataResponse, frame, body_at)
    listed = len(resp.topics)
    if listed < args.min_topics:
        raise RuntimeError(f"Metadata listed {listed} topics, expected at least {args.min_topics}")
    times.sort()

    def pct(q: float) -> float:
        return times[min(len(times) - 1, int(q * len(times)))] * 1000

    return {"requests": len(times), "topics_listed": listed, "response_kb": len(frame) / 1024,
            "latency_p50_ms": pct(0.5), "latency_p99_ms": pct(0.99), "latency_max_ms": times[-1] * 1000}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.clients.wire_client")
    sub = ap.add_subparsers(dest="cmd", required=True)
    cp = sub.add_parser("create-topics")
    cp.add_argument("bootstrap")
    cp.add_argument("prefix")
    cp.add_argument("count", type=int)
    cp.add_argument("--timeout", type=float, default=600)
    mp = sub.add_parser("metadata")
    mp.add_argument("bootstrap")
    mp.add_argument("requests", type=int)
    mp.add_argument("--min-topics", type=int, default=0)
    mp.add_argument("--timeout", type=float, default=120)
    args = ap.parse_args(argv)
    return answer(create_topics if args.cmd == "create-topics" else metadata, args)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
