"""Workloads: what is measured, with which client, and which metrics come out.

A workload is a class registered with `@register`; it lists its cases (one per combination of
parameters it measures) and runs one case against a running broker session. The runner
(bench/harness/runner.py) groups cases by the broker settings they need, starts each broker once per group
and round with fresh data, and runs the cases of the group against it, alternating targets.

Adding a workload (fetch sessions over many idle partitions, transactions, throttled clients...):
subclass `Workload`, give it a `name`, `description`, `order`, return `Case`s from `cases()`
(put broker settings a case needs, e.g. quotas, in `Case.broker`), return metric values from
`run()`, and decorate it with `@register`.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from bench import REPO_ROOT
from bench.clients import javatools

MB = 1024 * 1024


@dataclass(frozen=True)
class Metric:
    key: str  # key in the dict run() returns
    label: str  # e.g. "throughput"
    unit: str  # e.g. "MB/s"
    better: str  # "higher" or "lower"
    primary: bool = True  # shown in the main table and chart


@dataclass
class Case:
    workload: "Workload"
    id: str  # unique and stable: the key of this case in results
    title: str  # human-readable, for tables
    params: dict[str, Any]
    partitions: int | None  # None: runs in every broker session (e.g. start-up time)
    broker: dict[str, str] = field(default_factory=dict)  # extra broker settings (both targets)
    client: str = ""  # "java", "librdkafka" or "" (no client)

    @property
    def group_key(self) -> tuple:
        return (self.partitions, tuple(sorted(self.broker.items())))


@dataclass
class Sizes:
    """Record counts; `--smoke` uses tiny ones, `--scale` multiplies the defaults."""

    produce_bytes: int = 128 * MB  # per produce run of 1 KiB records (records = bytes / record size)
    produce_small_bytes: int = 64 * MB  # per produce run of 100-byte records
    librdkafka_factor: float = 2.0  # librdkafka is faster than the Java tool: longer runs
    consume_bytes: int = 128 * MB  # warm log read by each consumer
    latency_seconds: float = 5.0  # duration of the fixed-rate run
    warmup_bytes: int = 32 * MB  # per warm-up round, before any case of a broker session (not timed)
    warmup_requests: int = 3000  # one-record produce requests per warm-up round
    warmup_max_rounds: int = 8
    min_records: int = 1000
    timeout: float = 240.0  # per client run
    pipeline_events: int = 200_000  # events through the PySpark pipeline per run
    roll_latency_seconds: float = 10.0  # fixed-rate run of one-record batches into 1 MiB segments
    roll_latency_rate: int = 5000  # records/s offered to both brokers
    fetch_small_bytes: int = 8 * MB  # payload of the log of one-record batches read back
    metadata_topics: int = 10_000  # topics in the broker when Metadata is timed
    metadata_requests: int = 50
    setup_timeout: float = 1800.0  # creating the metadata case's topics (untimed)
    catchup_backlog: int = 500_000  # records behind the committed offset when the catch-up consumer restarts
    catchup_rate: int = 2000  # records/s produced meanwhile

    @classmethod
    def smoke(cls) -> "Sizes":
        return cls(produce_bytes=2 * MB, produce_small_bytes=1 * MB, librdkafka_factor=1.0, consume_bytes=2 * MB, latency_seconds=1.0, warmup_bytes=1 * MB, warmup_requests=200, warmup_max_rounds=3,
                   min_records=500, timeout=90.0, pipeline_events=3000,
                   roll_latency_seconds=1.0, roll_latency_rate=2000,
                   fetch_small_bytes=MB // 4, metadata_topics=100, metadata_requests=5, setup_timeout=120.0,
                   catchup_backlog=5000, catchup_rate=500)

    def scaled(self, factor: float) -> "Sizes":
        return dataclasses.replace(
            self,
            produce_bytes=int(self.produce_bytes * factor), produce_small_bytes=int(self.produce_small_bytes * factor),
            consume_bytes=int(self.consume_bytes * factor),
            latency_seconds=self.latency_seconds * max(factor, 0.2), warmup_bytes=int(self.warmup_bytes * factor),
            warmup_requests=max(200, int(self.warmup_requests * factor)), warmup_max_rounds=self.warmup_max_rounds,
            min_records=self.min_records, timeout=self.timeout,
            pipeline_events=max(1000, int(self.pipeline_events * factor)),
            roll_latency_seconds=self.roll_latency_seconds * max(factor, 0.1),
            fetch_small_bytes=int(self.fetch_small_bytes * factor),
            metadata_topics=max(10, int(self.metadata_topics * factor)),
            catchup_backlog=max(1000, int(self.catchup_backlog * factor)),
        )

    def records_for(self, nbytes: int, size: int) -> int:
        return max(self.min_records, nbytes // size)


class Context:
    """What a case sees while it runs: the session, the sizes, and state shared across runs."""

    def __init__(self, session: Any, target: str, round_no: int, sizes: Sizes, shared: dict[str, Any],
                 tools_libs: Path | None, log: Callable[[str], None]):
        self.session = session
        self.target = target
        self.round = round_no
        self.sizes = sizes
        self.shared = shared  # lives for the whole run (e.g. the latency run's fixed rate)
        self.session_state: dict[str, Any] = session.__dict__.setdefault("bench_state", {})
        self.tools_libs = tools_libs
        self.log = log

    @property
    def bootstrap(self) -> str:
        return self.session.bootstrap

    def new_topic(self, prefix: str, partitions: int, configs: dict[str, str] | None = None) -> str:
        """Create a topic with `partitions` partitions and wait until each has a leader."""
        from flotilla.testenv import kafka_wire

        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        deadline = time.monotonic() + 30
        with kafka_wire.connect(self.bootstrap) as conn:
            err = conn.create_topic(name, partitions, configs=configs)
            if int(err) != 0:
                raise RuntimeError(f"CreateTopics {name} ({partitions} partitions) answered error {err!r}")
            while True:
                md = conn.metadata([name])
                ts = [t for t in md.topics if t.name == name]
                if ts and int(ts[0].error_code) == 0 and len(ts[0].partitions) == partitions and all(
                    int(p.leader_id) >= 0 for p in ts[0].partitions
                ):
                    return name
                if time.monotonic() > deadline:
                    raise RuntimeError(f"topic {name} has no leaders after 30s: {md!r}")
                time.sleep(0.05)

    def need_tools(self) -> Path:
        if self.tools_libs is None:
            raise javatools.ToolError("Kafka's perf tools (kafka-tools jars) are not available")
        return self.tools_libs

    def broker_alive(self) -> bool:
        return self.session.alive()

    def producer_perf(self, topic: str, records: int, size: int, **kw: Any) -> dict[str, Any]:
        return javatools.producer_performance(self.bootstrap, topic, records, size, timeout=self.sizes.timeout,
                                              libs=self.need_tools(), broker_alive=self.broker_alive, **kw)

    def consumer_perf(self, topic: str, records: int) -> dict[str, Any]:
        return javatools.consumer_performance(self.bootstrap, topic, records, group=f"bench-{uuid.uuid4().hex[:8]}",
                                              timeout=self.sizes.timeout, libs=self.need_tools(),
                                              broker_alive=self.broker_alive)

    def rdkafka(self, *args: str) -> dict[str, Any]:
        return self.client("bench.clients.rdkafka_client", *args)

    def client(self, module: str, *args: str, timeout: float | None = None) -> dict[str, Any]:
        """Run one of the harness's client processes; its last stdout line is its JSON result."""
        timeout = self.sizes.timeout if timeout is None else timeout
        cmd = [sys.executable, "-m", module, *args, "--timeout", str(timeout)]
        stdout, _ = javatools.run_client(cmd, timeout + 30, self.broker_alive, cwd=REPO_ROOT)
        result = json.loads(stdout.strip().splitlines()[-1])
        result["command"] = " ".join(cmd)
        return result


class Workload:
    name = ""
    description = ""
    order = 50  # cases run in this order within a broker session
    # Needs a slow start-up of its own (Spark): left out of `--smoke` unless named in --workloads.
    slow_start = False

    def cases(self, cfg: "Config") -> list[Case]:
        raise NotImplementedError

    def metrics(self, case: Case) -> list[Metric]:
        raise NotImplementedError

    def run(self, ctx: Context, case: Case) -> dict[str, Any]:
        raise NotImplementedError

    def available(self, case: Case, tools: bool) -> str | None:
        """Why this case cannot run here (None: it can)."""
        if case.client == "java" and not tools:
            return "Kafka's perf tools are not available (kafka-tools jars not cached)"
        return None


@dataclass
class Config:
    partitions: list[int]
    clients: list[str]
    sizes: Sizes
    smoke: bool = False


REGISTRY: dict[str, Workload] = {}


def register(cls: type[Workload]) -> type[Workload]:
    REGISTRY[cls.name] = cls()
    return cls


CLIENT_LABEL = {"java": "Java perf tool", "librdkafka": "librdkafka"}
THROUGHPUT_SECONDARY = [
    Metric("records_per_sec", "throughput", "records/s", "higher", primary=False),
    Metric("broker_cpu_s_per_gb", "broker CPU per GB", "CPU s/GB", "lower", primary=False),
    Metric("broker_rss_peak_mb", "broker peak RSS", "MB", "lower", primary=False),
]


def with_window(ctx: Context, result: dict[str, Any], window: dict[str, Any], nbytes: float) -> dict[str, Any]:
    result.update(window)
    if nbytes > 0 and window.get("broker_cpu_seconds") is not None:
        result["broker_cpu_s_per_gb"] = window["broker_cpu_seconds"] / (nbytes / (1024 * MB))
    return result


def warm_up(ctx: Context, partitions: int) -> dict[str, Any]:
    """Not timed, the same for both targets: traffic before any case of a broker session until the
    broker's CPU cost per round stops falling, so that no case pays for a cold broker.

    A JVM interprets, then compiles with C1, then (after ~10-15 thousand calls or loop iterations)
    with C2; until then the same work costs Kafka several times more CPU. One round mixes what the
    cases do: large batches of 1 KiB records, idempotent batches of 100-byte records, one-record
    requests, and reading back with small fetches. Rounds repeat until the broker's CPU time per
    round has not fallen by 10 % below the best so far for two rounds in a row (at least 3 rounds,
    at most `warmup_max_rounds`). Python has no JIT: for Flotilla this settles after three rounds
    and only warms caches and allocators.
    """
    from bench.harness.targets import cpu_seconds

    t0 = time.monotonic()
    pid = ctx.session.broker.pid
    records = ctx.sizes.records_for(ctx.sizes.warmup_bytes, 1024)
    cpu: list[float] = []
    for n in range(ctx.sizes.warmup_max_rounds):
        c0 = cpu_seconds(pid)
        big = ctx.new_topic("warmup", partitions)
        ctx.rdkafka("produce", ctx.bootstrap, big, str(records), "1024", "--acks", "1")
        small = ctx.new_topic("warmup-idempotent", partitions)
        ctx.rdkafka("produce", ctx.bootstrap, small, str(records * 2), "100", "--acks", "all")
        many = ctx.new_topic("warmup-requests", partitions)
        ctx.rdkafka("produce", ctx.bootstrap, many, str(ctx.sizes.warmup_requests), "100", "--acks", "1",
                    "--linger-ms", "0", "--batch-size", "200")
        ctx.rdkafka("consume", ctx.bootstrap, big, str(records), "--max-partition-fetch-bytes", "65536")
        cpu.append(round(cpu_seconds(pid) - c0, 3))
        if n >= 2 and all(cpu[i] >= 0.9 * min(cpu[:i]) for i in (n - 1, n)):
            break  # two rounds in a row without a 10 % fall: settled
    if ctx.tools_libs is not None:  # the Java client's request versions too, once
        java = ctx.new_topic("warmup-java", partitions)
        ctx.producer_perf(java, records, 1024, acks="1")
    return {"records_per_round": records, "rounds": len(cpu), "broker_cpu_per_round": cpu,
            "seconds": round(time.monotonic() - t0, 2)}
