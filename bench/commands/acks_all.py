"""`python -m bench acks-all`: acks=all with replication factor 3 across three local brokers,
Flotilla (Kubernetes metadata on the test control plane of `flotilla testenv`) side by side with a
3-node Apache Kafka (KRaft, every node broker + controller, a static quorum) on the same machine.

Per target and round, a fresh topic of `--partitions` partitions, replication factor 3,
min.insync.replicas 2, every replica in the ISR before anything is timed; then Kafka's own
ProducerPerformance (Java, idempotent, acks=all, 1 KiB records, batch.size 64 KiB, linger.ms 5):

- throughput: `--records` records as fast as the producer can;
- latency: send-to-acknowledgement p50 / p99 / p99.9 at a fixed `--rate` (the same on both);
- replication lag under load, sampled every 100 ms during both: for every partition, the leader's
  log end offset minus each follower's, read from the brokers' own segment files (both write
  Kafka's on-disk batch format in `<log.dirs>/<topic>-<partition>/`), so the same method measures
  both brokers without depending on either one's metrics;
- broker CPU seconds per GB acknowledged, summed over the three brokers (the least noisy number on
  a shared 2-core machine, where the client and six broker processes compete).

Results go to bench/results/acks-all.{json,md}; ratios are Flotilla / Kafka. A target that cannot
run (Flotilla refusing replication factor 3 before replication exists, no Java) is reported as
such with the reason, never as a number.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import struct
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

from bench import RESULTS
from bench.harness.fleets import (FLEETS, MIN_INSYNC, NEVER_FLUSH, REPLICATION_FACTOR, TargetUnavailable,
                                  create_replicated_topic, wait_in_sync)
from bench.harness.targets import LABELS

RECORD_SIZE = 1024
LAG_INTERVAL = 0.1
GB = 1024 ** 3


# -- replication lag from the segment files -----------------------------------------------------
_HEADER = struct.Struct(">qi")  # baseOffset, batchLength
_LAST_DELTA = struct.Struct(">i")  # lastOffsetDelta, 23 bytes into the batch
_BATCH_OVERHEAD = 12  # baseOffset + batchLength precede the batchLength bytes


class LogEnd:
    """The log end offset of one replica, read incrementally from its newest segment file: the
    last complete batch's baseOffset + lastOffsetDelta + 1. Only batch headers are read."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.segment: Path | None = None
        self.position = 0
        self.end = 0

    def read(self) -> int:
        segments = sorted(self.directory.glob("*.log"))
        if not segments:
            return self.end
        if segments[-1] != self.segment:
            self.segment, self.position = segments[-1], 0
        try:
            with open(self.segment, "rb") as f:
                size = f.seek(0, 2)
                while self.position + _BATCH_OVERHEAD + 27 <= size:
                    f.seek(self.position)
                    head = f.read(27)
                    base, length = _HEADER.unpack_from(head)
                    if length <= 0 or self.position + _BATCH_OVERHEAD + length > size:
                        break  # being written
                    (delta,) = _LAST_DELTA.unpack_from(head, 23)
                    self.end = base + delta + 1
                    self.position += _BATCH_OVERHEAD + length
        except FileNotFoundError:
            pass
        return self.end


class LagSampler:
    """Samples, every 100 ms while open, the largest leader-minus-follower log end offset over
    every partition and follower of a topic (records behind)."""

    def __init__(self, log_dirs: dict[int, Path], topic: str, layout: dict[int, tuple[int, list[int]]]) -> None:
        self.ends = {(p, node): LogEnd(log_dirs[node] / f"{topic}-{p}")
                     for p, (_, replicas) in layout.items() for node in replicas}
        self.layout = layout
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def _sample(self) -> int:
        worst = 0
        for p, (leader, replicas) in self.layout.items():
            lead = self.ends[(p, leader)].read()
            for node in replicas:
                if node != leader:
                    worst = max(worst, lead - self.ends[(p, node)].read())
        return worst

    def _run(self) -> None:
        while not self._stop.wait(LAG_INTERVAL):
            self.samples.append(self._sample())

    def __enter__(self) -> "LagSampler":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def converged(self, timeout: float = 30.0) -> float | None:
        """Seconds after the load until every follower has the leader's log end (None: never)."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            if self._sample() == 0:
                return time.monotonic() - started
            time.sleep(0.02)
        return None

    def leader_total(self) -> int:
        """Sum of the leaders' log end offsets: every record acknowledged, if the files were read right."""
        return sum(self.ends[(p, leader)].read() for p, (leader, _) in self.layout.items())

    def summary(self) -> dict[str, Any]:
        xs = sorted(self.samples) or [0]
        return {"samples": len(self.samples), "p50_records": xs[len(xs) // 2],
                "p99_records": xs[min(len(xs) - 1, int(0.99 * len(xs)))], "max_records": xs[-1]}


# -- the two fleets ------------------------------------------------------------------------------
class Fleet:
    """Three running brokers: where clients connect, where each keeps its logs, its process."""

    def __init__(self, bootstraps: list[str], log_dirs: dict[int, Path], pids: list[int]) -> None:
        self.bootstraps, self.log_dirs, self.pids = bootstraps, log_dirs, pids

    @property
    def bootstrap(self) -> str:
        return ",".join(self.bootstraps)

    def cpu(self) -> float:
        from bench.harness.targets import cpu_seconds

        return sum(cpu_seconds(p) for p in self.pids)

    @classmethod
    def of(cls, cluster: Any) -> "Fleet":
        nodes = cluster.brokers
        return cls([n.bootstrap for n in nodes], {n.node_id: n.data_dir for n in nodes}, [n.pid for n in nodes])


OVERRIDES = {"apache": dict(NEVER_FLUSH), "flotilla": {**NEVER_FLUSH, "group.initial.rebalance.delay.ms": "0"}}


@contextlib.contextmanager
def start_fleet(target: str, workdir: Path) -> Iterator[Fleet]:
    """Three brokers of `target` (bench/harness/fleets.py) with this command's settings."""
    with FLEETS[target](workdir, OVERRIDES[target]) as cluster:
        yield Fleet.of(cluster)


# -- the workload ----------------------------------------------------------------------------------
def warm_up(fleet: Fleet, partitions: int, records: int) -> dict[str, Any]:
    """Untimed acks=all traffic first, the same for both: a fresh JVM runs interpreted, then
    C1-compiled, and only later C2-compiled code (the main bench's README shows a fresh Kafka broker
    spending about four times the CPU of a warm one); without this, the cases would measure Kafka's
    JIT warm-up. Python has no JIT; Flotilla gets the same traffic all the same."""
    from bench.clients import javatools

    rounds = []
    for _ in range(2):
        topic = f"acks-all-warmup-{uuid.uuid4().hex[:8]}"
        create_replicated_topic(fleet.bootstraps[0], topic, partitions)
        wait_in_sync(fleet.bootstraps[0], topic, partitions)
        cpu_before = fleet.cpu()
        r = javatools.producer_performance(fleet.bootstrap, topic, records, RECORD_SIZE, acks="all", timeout=900)
        rounds.append({"records_per_sec": r["records_per_sec"], "broker_cpu_s": fleet.cpu() - cpu_before})
    return {"records": records, "rounds": rounds}


def one_round(fleet: Fleet, partitions: int, records: int, rate: int, seconds: int,
              warmup_records: int = 0) -> dict[str, Any]:
    from bench.clients import javatools

    out: dict[str, Any] = {}
    if warmup_records:
        out["warmup"] = warm_up(fleet, partitions, warmup_records)
    for case, count, throughput in (("throughput", records, -1), ("latency", rate * seconds, rate)):
        topic = f"acks-all-{case}-{uuid.uuid4().hex[:8]}"
        create_replicated_topic(fleet.bootstraps[0], topic, partitions)
        layout = wait_in_sync(fleet.bootstraps[0], topic, partitions)
        cpu_before = fleet.cpu()
        with LagSampler(fleet.log_dirs, topic, layout) as lag:
            result = javatools.producer_performance(
                fleet.bootstrap, topic, count, RECORD_SIZE, acks="all", throughput=throughput, timeout=900)
        result["broker_cpu_s"] = fleet.cpu() - cpu_before
        result["broker_cpu_s_per_gb"] = result["broker_cpu_s"] / (count * RECORD_SIZE / GB)
        result["lag"] = lag.summary()
        result["lag"]["converged_s"] = lag.converged()
        # The lag numbers mean something only if the segment files were read right.
        result["lag"]["records_in_leader_logs"] = lag.leader_total()
        if lag.leader_total() != count:
            result["lag"]["error"] = f"leaders' logs hold {lag.leader_total()} records, {count} were acknowledged"
        result["leaders"] = sorted({leader for leader, _ in layout.values()})
        out[case] = result
    return out


def run(targets: list[str], rounds: int, partitions: int, records: int, rate: int, seconds: int,
        workdir: Path, warmup_records: int = 0) -> dict[str, Any]:
    from bench.clients import javatools
    from bench.harness.machine import OtherLoad, describe, load_snapshot

    javatools.ensure_tools(fetch=True)
    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": describe(),
        "settings": {"rounds": rounds, "partitions": partitions, "replication_factor": REPLICATION_FACTOR,
                     "min_insync_replicas": MIN_INSYNC, "record_size": RECORD_SIZE, "records": records,
                     "latency_rate": rate, "latency_seconds": seconds, "acks": "all", "idempotence": True,
                     "batch_size": 65536, "linger_ms": 5, "warmup_records": warmup_records},
        "targets": {t: {"rounds": [], "unavailable": None} for t in targets},
    }
    # Alternate which target goes first, so drift in the machine's load weighs on both alike.
    for r in range(rounds):
        order = targets if r % 2 == 0 else list(reversed(targets))
        for target in order:
            entry = result["targets"][target]
            if entry["unavailable"]:
                continue
            print(f"acks-all: round {r + 1}/{rounds}, {LABELS[target]}", file=sys.stderr, flush=True)
            load, other = load_snapshot(), OtherLoad()
            try:
                with start_fleet(target, workdir / f"{target}-{r}") as fleet:
                    measured = one_round(fleet, partitions, records, rate, seconds, warmup_records)
                # Cores used by other processes meanwhile (the brokers have been waited for now).
                measured["machine"] = {"before": load, "other_cores": other.lap()}
                entry["rounds"].append(measured)
            except TargetUnavailable as e:
                entry["unavailable"] = str(e)
                print(f"acks-all: {LABELS[target]} cannot run: {e}", file=sys.stderr, flush=True)
    return result


# -- report ----------------------------------------------------------------------------------------
METRICS = [  # (case, key, label, unit, higher is better)
    ("throughput", "records_per_sec", "throughput", "records/s", True),
    ("throughput", "mb_per_sec", "throughput", "MB/s", True),
    ("throughput", "latency_p99_ms", "p99 latency at full speed", "ms", False),
    ("throughput", "broker_cpu_s_per_gb", "broker CPU per GB (3 brokers)", "s", False),
    ("latency", "latency_p50_ms", "p50 latency at a fixed rate", "ms", False),
    ("latency", "latency_p99_ms", "p99 latency at a fixed rate", "ms", False),
    ("latency", "latency_p999_ms", "p99.9 latency at a fixed rate", "ms", False),
    ("throughput", ("lag", "p99_records"), "follower lag at full speed, p99 of samples", "records", False),
    ("throughput", ("lag", "max_records"), "follower lag at full speed, max", "records", False),
    ("latency", ("lag", "p99_records"), "follower lag at a fixed rate, p99 of samples", "records", False),
]


def _values(entry: dict[str, Any], case: str, key: Any) -> list[float]:
    out = []
    for rnd in entry["rounds"]:
        v = rnd[case]
        for k in (key if isinstance(key, tuple) else (key,)):
            v = v[k]
        out.append(float(v))
    return out


def _cell(xs: list[float]) -> str:
    if not xs:
        return "not run"
    med = statistics.median(xs)
    return f"{med:,.1f} ({min(xs):,.1f}–{max(xs):,.1f})" if len(xs) > 1 else f"{med:,.1f}"


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    f, k = result["targets"].get("flotilla"), result["targets"].get("apache")
    lines = [
        "# acks=all, replication factor 3, three brokers: Flotilla / Apache Kafka", "",
        f"Run {result['when']} on a shared 2-core machine (client and all six brokers on it), "
        f"{s['rounds']} round(s). Java ProducerPerformance, idempotent, acks=all, {s['record_size']}-byte records, "
        f"batch.size {s['batch_size']}, linger.ms {s['linger_ms']}; a fresh topic of {s['partitions']} partitions, "
        f"replication factor {s['replication_factor']}, min.insync.replicas {s['min_insync_replicas']} per case. "
        f"Throughput: {s['records']:,} records as fast as possible; latency: {s['latency_rate']:,} records/s for "
        f"{s['latency_seconds']} s. Before the cases, untimed: {s.get('warmup_records', 0):,} records at full "
        "speed, twice, on both (JIT warm-up of Kafka's JVMs; broker CPU of each warm-up run is in the JSON). "
        "Follower lag: leader minus follower log end offset over every partition, "
        "sampled every 100 ms from the segment files. Median over rounds (min–max).", "",
    ]
    for name, entry in (("Flotilla", f), ("Apache Kafka", k)):
        if entry and entry["unavailable"]:
            lines += [f"**{name} did not run:** {entry['unavailable']}", ""]
    lines += ["| metric | unit | Flotilla | Apache Kafka | Flotilla / Kafka | better |", "|---|---|---|---|---|---|"]
    for case, key, label, unit, higher in METRICS:
        fv = _values(f, case, key) if f else []
        kv = _values(k, case, key) if k else []
        ratio = "-"
        if fv and kv and statistics.median(kv):
            ratio = f"{statistics.median(fv) / statistics.median(kv):.2f}×"
        lines.append(f"| {label} | {unit} | {_cell(fv)} | {_cell(kv)} | {ratio} | {'higher' if higher else 'lower'} |")
    conv = []
    for name, entry in (("Flotilla", f), ("Apache Kafka", k)):
        if entry and entry["rounds"]:
            xs = [r["throughput"]["lag"]["converged_s"] for r in entry["rounds"]]
            conv.append(f"{name} " + ", ".join("never (30 s)" if x is None else f"{x:.2f} s" for x in xs))
    if conv:
        lines += ["", "Followers caught up with the leaders after the full-speed load: " + "; ".join(conv) + "."]
    busy = []
    for name, entry in (("Flotilla", f), ("Apache Kafka", k)):
        if entry and entry["rounds"]:
            cores = [r["machine"]["other_cores"] for r in entry["rounds"] if "machine" in r]
            if cores:
                busy.append(f"{name} rounds: " + ", ".join("?" if c is None else f"{c:.2f}" for c in cores))
    warm = []
    for name, entry in (("Flotilla", f), ("Apache Kafka", k)):
        for i, rnd in enumerate((entry or {}).get("rounds") or []):
            if "warmup" in rnd:
                warm.append(f"{name} round {i + 1}: " + " then ".join(
                    f"{w['broker_cpu_s']:.1f}" for w in rnd["warmup"]["rounds"]))
    if warm:
        lines += ["", "Broker CPU seconds of the two warm-up runs: " + "; ".join(warm) + "."]
    if busy:
        lines += ["", "Cores used by other processes on the machine during each round (of 2): " + "; ".join(busy) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench acks-all", description=__doc__.splitlines()[0])
    ap.add_argument("--targets", default="flotilla,apache")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--records", type=int, default=200_000, help="records of the throughput case")
    ap.add_argument("--rate", type=int, default=2_000, help="records/s of the latency case")
    ap.add_argument("--seconds", type=int, default=15, help="duration of the latency case")
    ap.add_argument("--warmup-records", type=int, default=200_000,
                    help="untimed acks=all records sent twice before the cases (0: none)")
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args(argv)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    for t in targets:
        if t not in FLEETS:
            ap.error(f"unknown target {t!r} (flotilla, apache)")
    with tempfile.TemporaryDirectory(prefix="bench-acks-all-") as tmp:
        result = run(targets, args.rounds, args.partitions, args.records, args.rate, args.seconds, Path(tmp),
                     args.warmup_records)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "acks-all.json").write_text(json.dumps(result, indent=1))
    (args.out / "acks-all.md").write_text(render(result))
    print(render(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
