"""The workloads of the one-broker comparison that need no module of their own: start-to-ready,
produce and consume throughput, produce latency, the PySpark pipeline, small-batch fetches, latency
while segments roll, Metadata with many topics, and broker memory (bench/README.md says what each
measures). Each registers itself with `@register` (bench/workloads/base.py) when imported."""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import Any

from bench import REPO_ROOT
from bench.clients import javatools
from bench.workloads.base import (CLIENT_LABEL, MB, THROUGHPUT_SECONDARY, Case, Config, Context, Metric, Workload,
                                  register, with_window)


# -- start-up ---------------------------------------------------------------------------------------


@register
class StartToReady(Workload):
    name = "start"
    description = (
        "Start-to-ready: from spawning the broker process (empty data directory) until its listener "
        "answers ApiVersions and a Metadata request listing a broker; measured at every broker start "
        "of the run, polled every 20 ms."
    )
    order = 0

    def cases(self, cfg: Config) -> list[Case]:
        return [Case(self, "start", "start-to-ready", {}, None)]

    def metrics(self, case: Case) -> list[Metric]:
        return [Metric("ready_seconds", "start-to-ready", "s", "lower")]

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        if ctx.session.ready_seconds is None:
            raise RuntimeError("the broker's start-to-ready time was not measured")
        return {"ready_seconds": ctx.session.ready_seconds, "idle_rss_mb": ctx.session.idle_rss_mb}

    def available(self, case: Case, tools: bool) -> str | None:
        return None


# -- produce ----------------------------------------------------------------------------------------


@register
class ProduceThroughput(Workload):
    name = "produce"
    description = (
        "Produce throughput: one producer sends N records of a fixed size as fast as it can "
        "(batch.size=65536, linger.ms=5, no compression) into a fresh topic: 1 KiB records in "
        "~64 KiB batches with acks=1 and with acks=all (idempotent: the Java producer's default, "
        "librdkafka is told to be), and 100-byte records with acks=1 (per-record costs)."
    )
    order = 10
    # 1 KiB records in ~64 KiB batches with both acks; 100-byte records (many records per batch).
    COMBOS = ((1024, "1"), (1024, "all"), (100, "1"))

    def cases(self, cfg: Config) -> list[Case]:
        out = []
        for p in cfg.partitions:
            for client in cfg.clients:
                for size, acks in self.COMBOS:
                    sz = "1KiB" if size == 1024 else f"{size}B"
                    out.append(Case(
                        self, f"produce-{sz}-acks{acks}-p{p}-{client}",
                        f"produce {sz} acks={acks}, {p} partition{'s' if p > 1 else ''}, {CLIENT_LABEL[client]}",
                        {"record_size": size, "acks": acks}, p, client=client,
                    ))
        return out

    def metrics(self, case: Case) -> list[Metric]:
        return [Metric("mb_per_sec", "throughput", "MB/s", "higher"), *THROUGHPUT_SECONDARY]

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        size, acks = case.params["record_size"], case.params["acks"]
        nbytes = ctx.sizes.produce_bytes if size >= 1024 else ctx.sizes.produce_small_bytes
        if case.client == "librdkafka":
            nbytes = int(nbytes * ctx.sizes.librdkafka_factor)
        records = ctx.sizes.records_for(nbytes, size)
        topic = ctx.new_topic("produce", case.partitions or 1)
        ctx.session.sampler.open()
        try:
            if case.client == "java":
                r = ctx.producer_perf(topic, records, size, acks=acks)
            else:
                r = ctx.rdkafka("produce", ctx.bootstrap, topic, str(records), str(size), "--acks", acks)
        finally:
            window = ctx.session.sampler.close().summary()
        r = with_window(ctx, r, window, records * size)
        if case.client == "java" and size == 1024 and acks == "1":
            # The peak the latency workload takes half of (Kafka's, once per partition count).
            ctx.shared.setdefault(("peak_rps", ctx.target, case.partitions), r["records_per_sec"])
        return r


# -- consume ----------------------------------------------------------------------------------------


@register
class ConsumeThroughput(Workload):
    name = "consume"
    description = (
        "Consume throughput from a warm log: a topic of 1 KiB records is written first (not timed, "
        "Java producer if available, else librdkafka; acks=1), so it sits in the page cache; then a consumer in a fresh group reads "
        "all of it from the beginning. This is the broker's zero-copy (sendfile) path. The Java tool "
        "reports fetch throughput excluding its group join; librdkafka assigns partitions directly."
    )
    order = 20

    def cases(self, cfg: Config) -> list[Case]:
        return [
            Case(self, f"consume-1KiB-p{p}-{client}",
                 f"consume 1KiB warm, {p} partition{'s' if p > 1 else ''}, {CLIENT_LABEL[client]}",
                 {"record_size": 1024}, p, client=client)
            for p in cfg.partitions for client in cfg.clients
        ]

    def metrics(self, case: Case) -> list[Metric]:
        return [Metric("mb_per_sec", "throughput", "MB/s", "higher"), *THROUGHPUT_SECONDARY]

    def warm_topic(self, ctx: Context, partitions: int) -> tuple[str, int]:
        key = ("warm_topic", partitions)
        if key not in ctx.session_state:
            records = ctx.sizes.records_for(ctx.sizes.consume_bytes, 1024)
            topic = ctx.new_topic("warm", partitions)
            if ctx.tools_libs is not None:
                ctx.producer_perf(topic, records, 1024, acks="1")
            else:
                ctx.rdkafka("produce", ctx.bootstrap, topic, str(records), "1024", "--acks", "1")
            ctx.session_state[key] = (topic, records)
        return ctx.session_state[key]

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        topic, records = self.warm_topic(ctx, case.partitions or 1)
        ctx.session.sampler.open()
        try:
            if case.client == "java":
                r = ctx.consumer_perf(topic, records)
            else:
                r = ctx.rdkafka("consume", ctx.bootstrap, topic, str(records))
        finally:
            window = ctx.session.sampler.close().summary()
        return with_window(ctx, r, window, records * 1024)


# -- latency ----------------------------------------------------------------------------------------


@register
class ProduceLatency(Workload):
    name = "latency"
    description = (
        "Produce latency at a fixed rate: the Java producer sends 1 KiB records (acks=1, linger.ms=5) at "
        "half of Apache Kafka's peak measured in this run (the `produce 1KiB acks=1` Java case, same "
        "partition count, first round); the tool reports send-to-acknowledgement percentiles. The same "
        "rate is offered to both brokers; a broker that cannot keep up queues, and it shows here."
    )
    order = 30

    def cases(self, cfg: Config) -> list[Case]:
        if "java" not in cfg.clients:
            return []
        return [
            Case(self, f"latency-1KiB-p{p}-java", f"produce latency 1KiB at ½ Kafka peak, {p} partition{'s' if p > 1 else ''}",
                 {"record_size": 1024, "acks": "1"}, p, client="java")
            for p in cfg.partitions
        ]

    def metrics(self, case: Case) -> list[Metric]:
        return [
            Metric("latency_p50_ms", "latency p50", "ms", "lower"),
            Metric("latency_p99_ms", "latency p99", "ms", "lower"),
            Metric("latency_p999_ms", "latency p99.9", "ms", "lower"),
            Metric("records_per_sec", "achieved rate", "records/s", "higher", primary=False),
            Metric("broker_rss_peak_mb", "broker peak RSS", "MB", "lower", primary=False),
        ]

    def rate(self, ctx: Context, partitions: int) -> tuple[int, str]:
        key = ("latency_rate", partitions)
        if key not in ctx.shared:
            apache = ctx.shared.get(("peak_rps", "apache", partitions))
            own = ctx.shared.get(("peak_rps", ctx.target, partitions))
            if apache:
                ctx.shared[key] = (max(100, int(apache / 2)), "half of Apache Kafka's peak (Java producer, 1 KiB, acks=1)")
            elif own and ctx.shared.get("apache_disabled"):
                ctx.shared[key] = (max(100, int(own / 2)), f"half of {ctx.target}'s own peak (Apache Kafka not run)")
            else:
                raise RuntimeError("no peak measured yet to take half of (the produce 1KiB acks=1 Java case must run first)")
        return ctx.shared[key]

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        rate, basis = self.rate(ctx, case.partitions or 1)
        records = max(ctx.sizes.min_records, int(rate * ctx.sizes.latency_seconds))
        topic = ctx.new_topic("latency", case.partitions or 1)
        ctx.session.sampler.open()
        try:
            r = ctx.producer_perf(topic, records, 1024, acks="1", throughput=rate)
        finally:
            window = ctx.session.sampler.close().summary()
        r.update(window)
        r["target_rate"] = rate
        r["rate_basis"] = basis
        return r


# -- the PySpark pipeline ----------------------------------------------------------------------------


@register
class PipelineThroughput(Workload):
    name = "pipeline"
    description = (
        "End-to-end events per second through the PySpark pipeline (pipeline/, docs/pipeline.md) on "
        "local[2]: N events (1 % malformed) are written to a fresh 3-partition raw topic first (not "
        "timed); then `python -m pipeline run` (Spark's Kafka connector, a fresh checkpoint, micro-batches "
        "of at most 20 000 records, no trigger delay) reads them, sends dead letters and windowed "
        "aggregates to their topics, and stops once caught up. Events per second = N / the time from "
        "the start of the first micro-batch that read data to the end of the last one (Spark start-up "
        "excluded, reported apart). Spark shares the 2 cores with the broker: this measures how much "
        "the broker slows a real Spark job down, not the broker's ceiling."
    )
    order = 40
    slow_start = True

    def cases(self, cfg: Config) -> list[Case]:
        p = cfg.partitions[0]
        return [Case(self, "pipeline-e2e", "PySpark pipeline end to end (3 raw partitions, local[2])",
                     {"raw_partitions": 3}, p, client="spark")]

    def metrics(self, case: Case) -> list[Metric]:
        return [
            Metric("events_per_sec", "end-to-end throughput", "events/s", "higher"),
            Metric("spark_startup_seconds", "Spark start-up (driver, queries)", "s", "lower", primary=False),
            Metric("broker_cpu_seconds", "broker CPU during the run", "CPU s", "lower", primary=False),
            Metric("broker_rss_peak_mb", "broker peak RSS", "MB", "lower", primary=False),
        ]

    def available(self, case: Case, tools: bool) -> str | None:
        import importlib.util

        if importlib.util.find_spec("pyspark") is None:
            return "PySpark not installed (bash scripts/setup.d/30-pipeline.sh)"
        from pipeline import spark_env

        if not (spark_env.jars_dir().parent / ".complete").exists():
            return "Spark's Kafka connector jars are not cached (python -m pipeline jars)"
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        from pipeline.events import GeneratorSettings
        from pipeline.generator import generate
        from pipeline.results import read_topic
        from pipeline.topics import Topics, ensure_topics

        n = ctx.sizes.pipeline_events
        suffix = uuid.uuid4().hex[:8]
        topics = Topics(raw=f"pipeline-raw-{suffix}", output=f"pipeline-out-{suffix}",
                        dead_letter=f"pipeline-dead-{suffix}", raw_partitions=case.params["raw_partitions"])
        ensure_topics(ctx.bootstrap, topics)
        generate(ctx.bootstrap, topics.raw, GeneratorSettings(seed=11, malformed_every=100), 0, n)
        checkpoint = ctx.session.workdir / f"pipeline-checkpoint-{suffix}"
        cmd = [sys.executable, "-m", "pipeline", "run", "--json", "--bootstrap", ctx.bootstrap,
               "--raw-topic", topics.raw, "--output-topic", topics.output, "--dead-letter-topic", topics.dead_letter,
               "--checkpoint", str(checkpoint), "--trigger", "0 seconds", "--max-offsets-per-trigger", "20000",
               "--stop-when-idle", "2"]
        ctx.session.sampler.open()
        try:
            stdout, _ = javatools.run_client(cmd, ctx.sizes.timeout + 120, ctx.broker_alive, cwd=REPO_ROOT)
        finally:
            window = ctx.session.sampler.close().summary()
        events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
        started = next(e for e in events if e["event"] == "started")
        stopped = next(e for e in events if e["event"] == "stopped")
        for query, totals in stopped["totals"].items():
            if totals["input_rows"] != n:
                raise RuntimeError(f"query {query} read {totals['input_rows']} of {n} events")
        if not read_topic(ctx.bootstrap, topics.output):
            raise RuntimeError("the pipeline wrote no aggregates")
        r = {"events": n, "busy_seconds": stopped["busy_seconds"], "events_per_sec": n / stopped["busy_seconds"],
             "spark_startup_seconds": started["startup_seconds"], "command": " ".join(cmd),
             "micro_batches": stopped["totals"]["aggregates"]["batches"]}
        r.update(window)
        return r


# -- costs that grow with scale (issue 8: items 4, 10, 11) --------------------------------------------


@register
class FetchSmallBatches(Workload):
    name = "fetch-small"
    description = (
        "Fetch of small batches: a topic of 100-byte records, one record per batch (librdkafka, "
        "batch.num.messages=1, linger.ms=0; not timed), then a librdkafka consumer reads all of it from "
        "the beginning. The broker's cost per batch returned dominates (MB/s of record values)."
    )
    order = 25

    def cases(self, cfg: Config) -> list[Case]:
        p = cfg.partitions[0]
        return [Case(self, f"fetch-small-100B-p{p}-librdkafka", f"fetch one-record batches (100 B), {p} partition"
                     f"{'s' if p > 1 else ''}, librdkafka", {"record_size": 100}, p, client="librdkafka")]

    def metrics(self, case: Case) -> list[Metric]:
        return [Metric("mb_per_sec", "throughput", "MB/s", "higher"), *THROUGHPUT_SECONDARY]

    def available(self, case: Case, tools: bool) -> str | None:
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        size = case.params["record_size"]
        records = ctx.sizes.records_for(ctx.sizes.fetch_small_bytes, size)
        topic = ctx.new_topic("small", case.partitions or 1)
        ctx.rdkafka("produce", ctx.bootstrap, topic, str(records), str(size), "--acks", "1", "--linger-ms", "0",
                    "--batch-num-messages", "1")
        ctx.session.sampler.open()
        try:
            r = ctx.rdkafka("consume", ctx.bootstrap, topic, str(records))
        finally:
            window = ctx.session.sampler.close().summary()
        return with_window(ctx, r, window, records * size)


@register
class RollLatency(Workload):
    name = "roll-latency"
    description = (
        "Produce latency with small batches while segments roll: librdkafka sends 100-byte records, one "
        "per batch (linger.ms=0, acks=1), at a fixed rate (the same for both brokers) into a topic with "
        "segment.bytes=1 MiB, so its log rolls every second or so; send-to-acknowledgement percentiles of "
        "every record. Work a broker does on its request path at a roll (fsync, snapshots) shows in p99."
    )
    order = 35

    def cases(self, cfg: Config) -> list[Case]:
        p = cfg.partitions[0]
        return [Case(self, f"roll-latency-100B-p{p}-librdkafka", f"produce latency, one-record batches, 1 MiB "
                     f"segments rolling, {p} partition{'s' if p > 1 else ''}, librdkafka",
                     {"record_size": 100, "segment_bytes": MB}, p, client="librdkafka")]

    def metrics(self, case: Case) -> list[Metric]:
        return [
            Metric("latency_p50_ms", "latency p50", "ms", "lower"),
            Metric("latency_p99_ms", "latency p99", "ms", "lower"),
            Metric("latency_p999_ms", "latency p99.9", "ms", "lower"),
            Metric("latency_max_ms", "latency max", "ms", "lower", primary=False),
            Metric("segments", "segments written", "segments", "higher", primary=False),
            Metric("records_per_sec", "achieved rate", "records/s", "higher", primary=False),
        ]

    def available(self, case: Case, tools: bool) -> str | None:
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        size, rate = case.params["record_size"], ctx.sizes.roll_latency_rate
        records = max(100, int(rate * ctx.sizes.roll_latency_seconds))
        topic = ctx.new_topic("roll", case.partitions or 1, configs={"segment.bytes": str(case.params["segment_bytes"])})
        # Let background work of earlier cases settle (an offsets topic being created for their
        # consumers, flushes), on both targets alike: this case measures rolls, not their tails.
        time.sleep(0.5 if ctx.sizes.roll_latency_seconds < 5 else 3.0)
        ctx.session.sampler.open()
        try:
            r = ctx.rdkafka("latency", ctx.bootstrap, topic, str(records), str(size), "--rate", str(rate))
        finally:
            window = ctx.session.sampler.close().summary()
        r.update(window)
        r["segments"] = sum(1 for _ in ctx.session.broker.log_dirs.glob(f"{topic}-*/*.log"))
        return r


@register
class MetadataAtScale(Workload):
    name = "metadata"
    description = (
        "Metadata latency with many topics: 10,000 one-partition topics are created (500 per CreateTopics "
        "request; not timed), then Metadata v12 for all topics is sent 50 times, one at a time, over a raw "
        "socket; time from sending to the last byte of the response (not decoded). Runs last in its "
        "broker session, which then holds all those topics."
    )
    order = 900

    def cases(self, cfg: Config) -> list[Case]:
        p = cfg.partitions[0]
        n = cfg.sizes.metadata_topics
        return [Case(self, f"metadata-all-topics-p{p}", f"Metadata (all topics) with {n:,} topics", {"topics": n}, p)]

    def metrics(self, case: Case) -> list[Metric]:
        return [
            Metric("latency_p50_ms", "latency p50", "ms", "lower"),
            Metric("latency_p99_ms", "latency p99", "ms", "lower"),
            Metric("create_seconds", "creating the topics", "s", "lower", primary=False),
            Metric("response_kb", "response size", "KB", "lower", primary=False),
        ]

    def available(self, case: Case, tools: bool) -> str | None:
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        n = case.params["topics"]
        created = ctx.client("bench.clients.wire_client", "create-topics", ctx.bootstrap, f"md{uuid.uuid4().hex[:6]}", str(n),
                             timeout=ctx.sizes.setup_timeout)
        ctx.session.sampler.open()
        try:
            r = ctx.client("bench.clients.wire_client", "metadata", ctx.bootstrap, str(ctx.sizes.metadata_requests),
                           "--min-topics", str(n))
        finally:
            window = ctx.session.sampler.close().summary()
        r.update(window)
        r["create_seconds"] = created["seconds"]
        return r


# -- memory -----------------------------------------------------------------------------------------


@register
class BrokerMemory(Workload):
    name = "memory"
    description = (
        "Broker resident memory: VmRSS of the broker process (and any children) from /proc, sampled "
        "every 100 ms; `idle` right after start, `under load` the peak over all the load cases of the "
        "same broker session (produce, consume, latency)."
    )
    order = 1000

    def cases(self, cfg: Config) -> list[Case]:
        return [
            Case(self, f"memory-p{p}", f"broker RSS, {p} partition{'s' if p > 1 else ''}", {}, p)
            for p in cfg.partitions
        ]

    def metrics(self, case: Case) -> list[Metric]:
        return [
            Metric("rss_idle_mb", "RSS idle", "MB", "lower"),
            Metric("rss_peak_mb", "RSS under load (peak)", "MB", "lower"),
        ]

    def available(self, case: Case, tools: bool) -> str | None:
        return None

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        peaks = ctx.session_state.get("rss_peaks", [])
        if not peaks:
            raise RuntimeError("no load case ran in this session, nothing to report")
        return {"rss_idle_mb": ctx.session.idle_rss_mb, "rss_peak_mb": max(peaks), "samples_from_cases": len(peaks)}

