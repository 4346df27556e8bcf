"""`python -m bench cluster-metadata`: cluster metadata timings of a 3-broker Flotilla cluster on the
test control plane (kube-apiserver + etcd of `flotilla testenv`), with Apache Kafka (one KRaft
node, broker + controller) alongside where its jars are cached.

- propagation: from sending CreateTopics (3 partitions) to one broker until every broker's
  Metadata answer lists the topic with a leader for every partition (polled every 5 ms).
- metadata latency with 1,000 topics: Metadata requests for all topics and for one topic, on a
  connection kept open, once 1,000 one-partition topics exist (`--topics`: 10,000 for issue 18).
- broker CPU while idle with that many topics (the Leases renewed all along), per broker and second.
- one large topic (`--big-partitions`, e.g. 2,000 with replication factor 3): from CreateTopics
  until every broker lists every partition with a leader and a full ISR, and Metadata latency for it.

Results go to bench/results/cluster_metadata.{json,md}. The machine is shared; a few rounds give
medians with their spread, not precise numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import RESULTS
from bench.harness.fleets import flotilla_fleet
from flotilla.testenv import kafka_wire


def _until(check, timeout: float, interval: float = 0.005):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return False


def _has_leaders(conn: kafka_wire.KafkaConnection, topic: str, partitions: int) -> bool:
    md = conn.metadata([topic])
    t = md.topics[0]
    return int(t.error_code) == 0 and len(t.partitions) == partitions and all(
        int(p.leader_id) >= 0 for p in t.partitions)


def propagation(bootstraps: list[str], rounds: int) -> list[float]:
    """Seconds from CreateTopics to the topic being usable (leaders) on every broker."""
    conns = [kafka_wire.connect(b) for b in bootstraps]
    out = []
    try:
        for i in range(rounds):
            topic = kafka_wire.unique_topic("prop")
            via = conns[i % len(conns)]
            started = time.perf_counter()
            code = via.create_topic(topic, 3)
            assert int(code) == 0, code
            for c in conns:
                if not _until(lambda: _has_leaders(c, topic, 3), 60):
                    raise RuntimeError(f"{topic} not usable within 60 s")
            out.append(time.perf_counter() - started)
    finally:
        for c in conns:
            c.close()
    return out


def create_many(bootstrap: str, count: int, batch: int = 50) -> float:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    import datetime

    started = time.perf_counter()
    with kafka_wire.connect(bootstrap, timeout=120) as conn:
        for start in range(0, count, batch):
            req = CreateTopicsRequest(topics=tuple(
                CreatableTopic(name=f"many-{n:05d}", num_partitions=1, replication_factor=1, assignments=(), configs=())
                for n in range(start, min(count, start + batch))),
                timeout=datetime.timedelta(seconds=60), validate_only=False)
            resp = conn.request(req)
            bad = [t for t in resp.topics if int(t.error_code) not in (0, 36)]
            assert not bad, bad[:3]
    return time.perf_counter() - started


def metadata_latency(bootstrap: str, requests: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"all_topics": [], "one_topic": []}
    with kafka_wire.connect(bootstrap, timeout=60) as conn:
        for key, topics in (("all_topics", None), ("one_topic", ["many-00000"])):
            conn.metadata(topics)  # warm
            for _ in range(requests):
                started = time.perf_counter()
                md = conn.metadata(topics)
                out[key].append(time.perf_counter() - started)
            if key == "all_topics":
                assert len(md.topics) >= 1000, len(md.topics)
    return out


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(pids: list[int], seconds: float) -> list[float]:
    """Each process's CPU seconds per second over `seconds` of no client traffic."""
    before = [cpu_seconds(p) for p in pids]
    time.sleep(seconds)
    return [(cpu_seconds(p) - b) / seconds for p, b in zip(pids, before)]


def big_topic(bootstraps: list[str], partitions: int, rf: int, requests: int) -> dict[str, Any]:
    """Seconds from CreateTopics of one topic of `partitions` x `rf` until every broker lists every
    partition with a leader and a full ISR; then Metadata latency for that topic alone."""
    conns = [kafka_wire.connect(b, timeout=60) for b in bootstraps]
    out: dict[str, Any] = {"partitions": partitions, "replication_factor": rf}
    try:
        started = time.perf_counter()
        code = conns[0].create_topic("big", partitions, replication_factor=rf)
        assert int(code) == 0, code
        out["create_answered_s"] = time.perf_counter() - started

        def complete(c) -> bool:
            t = c.metadata(["big"]).topics[0]
            return int(t.error_code) == 0 and len(t.partitions) == partitions and all(
                int(p.leader_id) >= 0 and len(p.isr_nodes) == rf for p in t.partitions)

        for c in conns:
            if not _until(lambda: complete(c), 600, 0.1):
                raise RuntimeError(f"big topic not complete on every broker within 600 s")
        out["usable_everywhere_s"] = time.perf_counter() - started
        lat = []
        for _ in range(requests):
            t0 = time.perf_counter()
            conns[1].metadata(["big"])
            lat.append(time.perf_counter() - t0)
        out["metadata_s"] = lat
    finally:
        for c in conns:
            c.close()
    return out


def wait_listed(bootstrap: str, topics: int) -> None:
    """Until the broker's Metadata lists every created topic (CreateTopics may answer first)."""
    with kafka_wire.connect(bootstrap, timeout=60) as c:
        if not _until(lambda: len(c.metadata(None).topics) >= topics, 300, 0.5):
            raise RuntimeError(f"{bootstrap} does not list {topics} topics after 300 s")


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {"n": len(xs), "median_ms": 1000 * statistics.median(xs), "min_ms": 1000 * xs[0],
            "max_ms": 1000 * xs[-1], "p90_ms": 1000 * xs[int(0.9 * (len(xs) - 1))]}


def run_flotilla(workdir: Path, rounds: int, requests: int, topics: int, big: int = 0) -> dict[str, Any]:
    with flotilla_fleet(workdir) as cluster:
        bootstraps = [b.bootstrap for b in cluster.brokers]
        prop = propagation(bootstraps, rounds)
        big_result = big_topic(bootstraps, big, 3, requests) if big else None
        print(f"big topic: {big_result and {k: v for k, v in big_result.items() if k != 'metadata_s'}}",
              file=sys.stderr, flush=True)
        t0 = time.perf_counter()
        created_s = create_many(bootstraps[0], topics)
        for b in bootstraps:  # every broker has the 1,000 topics before timing
            wait_listed(b, topics)
        listed_s = time.perf_counter() - t0
        print(f"{topics} topics created in {created_s:.1f} s, listed everywhere after {listed_s:.1f} s",
              file=sys.stderr, flush=True)
        lat = metadata_latency(bootstraps[1], requests)
        idle = idle_cpu([b.pid for b in cluster.brokers], 30.0)
    return {"propagation_s": prop, "create_1000_s": created_s, "metadata_s": lat,
            "listed_everywhere_s": listed_s, "idle_cpu_per_s": idle, "big_topic": big_result}


def run_kafka(workdir: Path, rounds: int, requests: int, topics: int) -> dict[str, Any] | None:
    from flotilla.testenv.brokers.apache_kafka import ApacheKafka, kafka_home

    if not (kafka_home() / ".complete").exists():
        return None
    with ApacheKafka(workdir / "kafka") as k:
        prop = propagation([k.bootstrap], rounds)
        created_s = create_many(k.bootstrap, topics)
        wait_listed(k.bootstrap, topics)
        lat = metadata_latency(k.bootstrap, requests)
    return {"propagation_s": prop, "create_1000_s": created_s, "metadata_s": lat}


def render(result: dict[str, Any]) -> str:
    lines = ["# Cluster metadata: propagation and Metadata latency", "",
             f"Run {result['when']} on a shared 2-core machine; {result['rounds']} propagation rounds,",
             f"{result['requests']} Metadata requests per kind. Few rounds on a busy machine: read the",
             "medians as orders of magnitude, not precise numbers.", "",
             "| measure | Flotilla (3 brokers, Kubernetes metadata) | Apache Kafka (1 KRaft node) | ratio |",
             "|---|---|---|---|"]
    f, k = result["flotilla"], result.get("kafka")

    def row(name: str, fv: dict, kv: dict | None) -> None:
        ks = f"{kv['median_ms']:.1f} ms (p90 {kv['p90_ms']:.1f})" if kv else "not run"
        ratio = f"{fv['median_ms'] / kv['median_ms']:.1f}x" if kv else "-"
        lines.append(f"| {name} | {fv['median_ms']:.1f} ms (p90 {fv['p90_ms']:.1f}) | {ks} | {ratio} |")

    row("topic create -> usable on every broker", summary(f["propagation_s"]), summary(k["propagation_s"]) if k else None)
    n = f"{result.get('topics', 1000):,}"
    row(f"Metadata, all {n} topics", summary(f["metadata_s"]["all_topics"]),
        summary(k["metadata_s"]["all_topics"]) if k else None)
    row(f"Metadata, one topic ({n} exist)", summary(f["metadata_s"]["one_topic"]),
        summary(k["metadata_s"]["one_topic"]) if k else None)
    lines += ["", f"Creating {n} topics (50 per CreateTopics request): Flotilla {f['create_1000_s']:.1f} s"
              + (f" (listed by every broker after {f['listed_everywhere_s']:.1f} s)" if f.get("listed_everywhere_s") else "")
              + (f", Kafka {k['create_1000_s']:.1f} s." if k else ".")]
    if f.get("idle_cpu_per_s"):
        lines += ["", f"Flotilla broker CPU while idle with {n} topics (30 s, Leases renewed meanwhile): "
                  + ", ".join(f"{1000 * c:.0f} ms/s" for c in f["idle_cpu_per_s"]) + " (per broker)."]
    big = f.get("big_topic")
    if big:
        lat = summary(big["metadata_s"])
        lines += ["", f"One topic of {big['partitions']:,} partitions, replication factor {big['replication_factor']}: "
                  f"CreateTopics answered after {big['create_answered_s']:.1f} s, every partition with a leader and "
                  f"a full ISR on every broker after {big['usable_everywhere_s']:.1f} s; Metadata for that topic "
                  f"{lat['median_ms']:.1f} ms (p90 {lat['p90_ms']:.1f})."]
    lines += [
              "", "Kafka runs one node, so its propagation is local; Flotilla's crosses the API server,",
              "the controller's write and a watch to the two other brokers."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench cluster-metadata", description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--big-partitions", type=int, default=0,
                    help="also one topic of this many partitions, replication factor 3 (Flotilla only)")
    ap.add_argument("--name", default="cluster_metadata", help="results file stem")
    ap.add_argument("--no-kafka", action="store_true")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        work = Path(tmp)
        result: dict[str, Any] = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                  "rounds": args.rounds, "requests": args.requests, "topics": args.topics}
        args.out.mkdir(parents=True, exist_ok=True)
        result["flotilla"] = run_flotilla(work, args.rounds, args.requests, args.topics, args.big_partitions)
        (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))  # kept if Kafka fails
        result["kafka"] = None if args.no_kafka else run_kafka(work, args.rounds, args.requests, args.topics)
    (args.out / f"{args.name}.json").write_text(json.dumps(result, indent=1))
    (args.out / f"{args.name}.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
