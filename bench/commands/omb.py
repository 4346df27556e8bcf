"""`python -m bench omb`: production-shaped cases on three brokers each side, Flotilla (fleet on the
test control plane) against a 3-node Apache Kafka 4.1 (KRaft), shaped like the OpenMessaging
Benchmark's `1-topic-100-partitions-1kb-4p-4c` workload with its Kafka driver's client settings.

Cases, per target, on one fleet start (in this order, the failover last since it kills a broker):

- `omb-max`: one topic of 100 partitions, RF 3, min.insync.replicas 2; 4 producers (acks=all,
  idempotent, linger.ms 1, batch.size 1 MiB: OMB's kafka-throughput driver) and 4 consumers in
  one group, 1 KiB records, as fast as the producers can;
- `omb-rate`: the same at a fixed rate, half of Kafka's `omb-max` produce rate of this run;
- `txn`: 2 transactional producers, transactions of 100 records of 1 KiB, a read_committed
  consumer; as fast as they can, then at half of Kafka's transactional rate;
- `failover`: the `omb-rate` load; kill -9 of the broker leading the most partitions among those
  that are not the active controller; produce latency over the following seconds, the time until
  every partition has a live leader again, and acknowledged records lost (the whole topic read back
  at the end and compared with the acks);
- `controller-failover`: the killed broker restarted and back in every ISR, then the same with a
  kill -9 of the active controller (Kafka's: the quorum leader DescribeQuorum names, a combined
  broker and controller; Flotilla's: the holder of the controller Lease).

Every client is its own process (bench/clients/omb_client.py). Results: bench/results/<name>.{json,md,png};
ratios are Flotilla / Kafka. A target that cannot run says why instead of giving numbers.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Callable

from bench import REPO_ROOT, RESULTS, WORK
from bench.harness.fleets import FLEETS, NEVER_FLUSH, TargetUnavailable, create_replicated_topic, fleet_cpu, wait_in_sync
from bench.harness.report import cores_note, fleet_table, versions_line, with_notes, write_case
from bench.harness.samples import percentiles, read_samples
from bench.harness.targets import LABELS
from bench.commands import omb_curve

GB = 1024 ** 3
# Kafka fences a broker that stopped heartbeating after broker.session.timeout.ms (default 9 s);
# Flotilla's equivalent is its metadata Lease. The same on both, so that the failover case
# compares what the brokers do once the death is noticed, not two different timeouts.
FAILURE_DETECTION_MS = 9000


@dataclasses.dataclass
class Params:
    partitions: int = 100
    producers: int = 4
    consumers: int = 4
    size: int = 1024
    warmup_seconds: float = 15
    max_seconds: float = 30
    rate_seconds: float = 30
    rate: float = 0  # records/s of the fixed-rate cases (0: half Kafka's omb-max of this run)
    txn_producers: int = 2
    per_txn: int = 100
    txn_seconds: float = 20
    txn_rate: float = 0  # records/s of the fixed-rate transactional case (0: half Kafka's)
    failover_before: float = 10
    failover_after: float = 30
    linger_ms: int = 1
    batch_size: int = 1048576
    cases: tuple[str, ...] = ("omb", "txn", "failover", "controller-failover")
    #: every case a run may name; `curve` (bench/commands/omb_curve.py) only when asked (--rates)
    KNOWN = ("omb", "txn", "failover", "controller-failover", "curve")

    @classmethod
    def smoke(cls) -> "Params":
        return cls(partitions=6, producers=2, consumers=2, warmup_seconds=0, max_seconds=3, rate_seconds=3,
                   txn_seconds=3, failover_before=3, failover_after=6)


# -- fleets ---------------------------------------------------------------------------------------
# Failure detection as FAILURE_DETECTION_MS on both: Kafka's session timeout, Flotilla's Lease.
OVERRIDES = {
    "apache": {**NEVER_FLUSH, "group.initial.rebalance.delay.ms": "0",
               "broker.session.timeout.ms": str(FAILURE_DETECTION_MS)},
    "flotilla": {**NEVER_FLUSH, "group.initial.rebalance.delay.ms": "0",
                 "flotilla.metadata.lease.duration.ms": str(FAILURE_DETECTION_MS)},
}


def start_fleet(target: str, workdir: Path) -> contextlib.AbstractContextManager[Any]:
    """Three brokers of `target` with this command's settings (bench/commands/drain.py uses them too)."""
    return FLEETS[target](workdir, OVERRIDES[target])


# -- one load: producers and consumers in child processes -----------------------------------------
def _client(*args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.Popen([sys.executable, "-m", "bench.clients.omb_client", *args], cwd=REPO_ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _answer(proc: subprocess.Popen, what: str, timeout: float) -> dict[str, Any]:
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise RuntimeError(f"{what} did not finish within {timeout:.0f}s; stderr: {err[-2000:]}")
    if proc.returncode != 0:
        raise RuntimeError(f"{what} exited {proc.returncode}: {err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1])


def _wait_group(workdir: Path, consumers: int, partitions: int, procs: list[subprocess.Popen],
                timeout: float = 90.0) -> float:
    """Until the group's members together hold every partition, each at least one, for 0.5 s."""
    started = time.monotonic()
    deadline = started + timeout
    stable_since = None
    last: list[str] = []
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"a consumer exited before the group formed: {p.communicate()[1][-2000:]}")
        try:
            last = [(workdir / f"consumer-{i}.assigned").read_text() or "0" for i in range(consumers)]
            counts = [int(x) for x in last]
        except (OSError, ValueError):
            counts = []
        ok = len(counts) == consumers and sum(counts) == partitions and min(counts) > 0
        if ok:
            stable_since = stable_since or time.monotonic()
            if time.monotonic() - stable_since >= 0.5:
                return time.monotonic() - started
        else:
            stable_since = None
        time.sleep(0.1)
    raise RuntimeError(f"the consumer group did not cover {partitions} partitions within {timeout:.0f}s "
                       f"(assignments: {last})")


def run_load(cluster: Any, topic: str, workdir: Path, *, producers: int, consumers: int, seconds: float,
             rate: float, p: Params, per_txn: int = 0, isolation: str = "read_uncommitted",
             during: Callable[[float], dict[str, Any]] | None = None, after: float = 0.0) -> dict[str, Any]:
    """Consumers join first; producers start together once the group holds every partition and
    send for `seconds` at `rate` records/s in total (0: as fast as they can). `during(t0)` runs in
    a thread `after` seconds into the load (the failover's kill). Returns throughputs,
    percentiles and the brokers' CPU over the load."""
    workdir.mkdir(parents=True, exist_ok=True)
    stop = workdir / "stop"
    bootstrap = cluster.bootstrap
    group = f"omb-{uuid.uuid4().hex[:8]}"
    timeout = seconds + 240
    cons = [_client("consumer", bootstrap, topic, "--id", str(i), "--group", group, "--stop-file", str(stop),
                    "--isolation", isolation, "--out", str(workdir), "--timeout", str(timeout + 120))
            for i in range(consumers)]
    prods: list[subprocess.Popen] = []
    try:
        join_s = _wait_group(workdir, consumers, p.partitions, cons)
        start_at = time.monotonic() + 3.0  # producer processes import and connect before this
        per_rate = rate / producers if rate else 0
        for i in range(producers):
            args = ["producer", bootstrap, topic, "--id", str(i), "--seconds", str(seconds), "--rate", str(per_rate),
                    "--start-at", str(start_at), "--size", str(p.size), "--linger-ms", str(p.linger_ms),
                    "--batch-size", str(p.batch_size), "--out", str(workdir), "--timeout", "120"]
            if per_txn:
                args += ["--per-txn", str(per_txn)]
            if during:
                args.append("--tolerate-errors")
            prods.append(_client(*args))
        while time.monotonic() < start_at:
            time.sleep(0.01)
        cpu0 = fleet_cpu(cluster)
        event: dict[str, Any] = {}
        thread = None
        if during:
            def run_during() -> None:
                time.sleep(max(0.0, start_at + after - time.monotonic()))
                try:
                    event.update(during(start_at))
                except Exception as e:  # reported with the case
                    event["error"] = f"{type(e).__name__}: {e}"

            thread = threading.Thread(target=run_during, daemon=True)
            thread.start()
        pres = [_answer(pr, f"producer {i}", timeout + 60) for i, pr in enumerate(prods)]
        stop.write_text("")
        cres = [_answer(c, f"consumer {i}", 300) for i, c in enumerate(cons)]
        cpu = fleet_cpu(cluster) - cpu0
        if thread:
            thread.join(150)
    finally:
        for proc in prods + cons:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    sent_at: list[float] = []
    lat: list[float] = []
    for i in range(producers):
        sent_at += read_samples(workdir / f"producer-{i}.sent")
        lat += read_samples(workdir / f"producer-{i}.lat")
    arrived: list[float] = []
    e2e: list[float] = []
    for i in range(consumers):
        arrived += read_samples(workdir / f"consumer-{i}.arrived")
        e2e += read_samples(workdir / f"consumer-{i}.lat")
    acked = sum(r["acked"] for r in pres)
    t0 = min(r["start"] for r in pres)
    last_ack = max((s + d for s, d in zip(sent_at, lat)), default=t0)
    last_arrival = max(arrived, default=t0)
    mb = p.size / (1024 * 1024)
    out: dict[str, Any] = {
        "topic": topic, "group_join_s": join_s, "offered_rate": rate or None,
        "sent": sum(r["sent"] for r in pres), "acked": acked, "consumed": len(arrived),
        "delivery_errors": sum(r["errors"] for r in pres), "undelivered": sum(r["undelivered"] for r in pres),
        "produce_records_per_sec": acked / (last_ack - t0) if last_ack > t0 else None,
        "consume_records_per_sec": len(arrived) / (last_arrival - t0) if last_arrival > t0 else None,
        **percentiles(lat, "produce"), **percentiles(e2e, "e2e"),
        "broker_cpu_s": cpu, "broker_cpu_s_per_gb": cpu / (acked * p.size / GB) if acked else None,
        "producers": pres, "consumers": cres,
    }
    out["produce_mb_per_sec"] = out["produce_records_per_sec"] * mb if out["produce_records_per_sec"] else None
    out["consume_mb_per_sec"] = out["consume_records_per_sec"] * mb if out["consume_records_per_sec"] else None
    if per_txn:
        commits = [r["commit_p99_ms"] for r in pres if r.get("commit_p99_ms") is not None]
        out["transactions"] = sum(r["transactions"] for r in pres)
        out["commit_p99_ms"] = max(commits) if commits else None
    if during:
        out["event"] = event
        kill = event.get("killed_at")
        if kill is not None:
            # After: every record whose wait overlapped the 30 s after the kill (in flight at the
            # kill, or sent during those seconds); before: the steady state, acknowledged before it.
            window = [d for s, d in zip(sent_at, lat) if s + d >= kill and s < kill + p.failover_after]
            before = [d for s, d in zip(sent_at, lat) if s + d < kill]
            out.update(percentiles(window, "after_kill_produce"))
            out.update(percentiles(before, "before_kill_produce"))
            out["after_kill_acked"] = len(window)
    return out


# -- the cases ------------------------------------------------------------------------------------
def new_topic(cluster: Any, prefix: str, p: Params) -> tuple[str, dict[int, tuple[int, list[int]]]]:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_replicated_topic(cluster.brokers[0].bootstrap, topic, p.partitions)
    return topic, wait_in_sync(cluster.brokers[0].bootstrap, topic, p.partitions, timeout=180)


def leaderless_until(cluster: Any, topic: str, victim: int, partitions: int, timeout: float = 120.0) -> float | None:
    """Seconds until a surviving broker's metadata names a live leader (not `victim`, not none)
    for every partition; None if not within `timeout`. Polled every 100 ms."""
    started = time.monotonic()
    from flotilla.testenv import kafka_wire

    while time.monotonic() - started < timeout:
        for b in cluster.running():
            try:
                with kafka_wire.connect(b.bootstrap, timeout=2) as conn:
                    t = conn.metadata([topic]).topics[0]
                leaders = [int(x.leader_id) for x in t.partitions]
                if len(leaders) == partitions and all(lid >= 0 and lid != victim for lid in leaders):
                    return time.monotonic() - started
                break
            except Exception:
                continue
        time.sleep(0.1)
    return None


def active_controller(cluster: Any) -> int:
    """The node acting as controller: the leader of the metadata quorum as DescribeQuorum names it
    (Kafka forwards the request to its active controller; Flotilla answers with the holder of its
    controller Lease). Metadata's controller_id would not do: Kafka names a random live broker."""
    from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData
    from flotilla.testenv import kafka_wire

    deadline, last = time.monotonic() + 60, None
    while time.monotonic() < deadline:
        for b in cluster.running():
            try:
                with kafka_wire.connect(b.bootstrap, timeout=5) as conn:
                    resp = conn.request(DescribeQuorumRequest(topics=(TopicData(
                        topic_name="__cluster_metadata", partitions=(PartitionData(partition_index=0),)),)))
                leader = int(resp.topics[0].partitions[0].leader_id)
                if leader >= 0:
                    return leader
                last = f"no quorum leader (from {b.bootstrap})"
            except Exception as e:  # that broker is restarting: ask another
                last = e
        time.sleep(0.25)
    raise TargetUnavailable(f"DescribeQuorum named no active controller within 60 s (last: {last})")


def failover(cluster: Any, rate: float, p: Params, workdir: Path, controller: bool = False) -> dict[str, Any]:
    """kill -9 of the active controller (`controller`), or of the broker leading the most
    partitions among the others, under the fixed-rate load."""
    topic, layout = new_topic(cluster, "controller-failover" if controller else "failover", p)
    counts: dict[int, int] = {}
    for leader, _ in layout.values():
        counts[leader] = counts.get(leader, 0) + 1
    active = active_controller(cluster)
    others = [n for n in sorted(counts) if n != active] or sorted(counts)
    victim = active if controller else max(others, key=lambda n: counts[n])

    def kill(start_at: float) -> dict[str, Any]:
        broker = cluster.broker(victim)
        killed_at = time.monotonic()
        broker.kill9()
        return {"victim": victim, "victim_led": counts.get(victim, 0), "killed_at": killed_at,
                "active_controller": active, "killed_after_s": killed_at - start_at,
                "leaderless_s": leaderless_until(cluster, topic, victim, p.partitions)}

    seconds = p.failover_before + p.failover_after + 5
    load = run_load(cluster, topic, workdir, producers=p.producers, consumers=p.consumers, seconds=seconds,
                    rate=rate, p=p, during=kill, after=p.failover_before)
    proc = _client("verify", cluster.bootstrap, topic, "--acked", str(workdir))
    load["verify"] = _answer(proc, "verify", 400)
    load["lost"] = load["verify"]["lost"]
    load["leaders_per_broker"] = counts
    return load


def restart_killed(cluster: Any, workdir: Path) -> float:
    """Start every broker that is not running and wait until a fresh topic has every replica in
    sync (the fleet whole again); the seconds it took."""
    started = time.monotonic()
    for b in cluster.brokers:
        if not b.is_running():
            b.start()
    probe, via = f"whole-{uuid.uuid4().hex[:8]}", cluster.brokers[0].bootstrap
    create_replicated_topic(via, probe, len(cluster.brokers))
    wait_in_sync(via, probe, len(cluster.brokers), timeout=180)
    return time.monotonic() - started


def one_target(cluster: Any, p: Params, rates: dict[str, float], workdir: Path, target: str,
               out: dict[str, Any], errors: list[str]) -> None:
    """Every case on one fleet, into `out`; `rates` carries Kafka's measured peaks to the other
    target. A case that fails is recorded in `errors` and the next one still runs."""
    step = 0

    def wd(name: str) -> Path:
        nonlocal step
        step += 1
        return workdir / f"{step:02d}-{name}"

    def say(what: str) -> None:
        print(f"omb: {LABELS[target]}: {what} ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)

    def load(case: str, rate: float, **kw: Any) -> None:
        if case.endswith("-rate") and not rate:
            errors.append(f"{case}: not run, no peak was measured to take half of")
            return
        say(case + (f" at {rate:,.0f} records/s" if rate else ""))
        try:
            topic, _ = new_topic(cluster, case, p)
            out[case] = run_load(cluster, topic, wd(case), rate=rate, p=p, **kw)
        except Exception as e:  # recorded with the results; the next case still runs
            errors.append(f"{case}: {type(e).__name__}: {e}")
            say(f"{case} failed: {e}")

    def half_peak(key: str, case: str) -> float:
        peak = (out.get(case) or {}).get("produce_records_per_sec") or 0
        if target == "apache" and peak:
            rates[key] = peak / 2
        return rates.get(key) or peak / 2

    omb = dict(producers=p.producers, consumers=p.consumers)
    if p.warmup_seconds:
        load("warmup", 0, seconds=p.warmup_seconds, **omb)
        w = out.pop("warmup", None)
        if w:
            out["warmup"] = {k: w[k] for k in ("produce_records_per_sec", "broker_cpu_s", "acked")}
    if "omb" in p.cases or "curve" in p.cases:
        load("omb-max", 0, seconds=p.max_seconds, **omb)
        peak = (out.get("omb-max") or {}).get("produce_records_per_sec") or 0
        if target == "apache" and peak:
            rates["omb-peak"] = peak
    if "omb" in p.cases:
        load("omb-rate", p.rate or half_peak("omb", "omb-max"), seconds=p.rate_seconds, **omb)
    if "curve" in p.cases:  # Kafka's peak when it ran first, else this target's own
        peak = rates.get("omb-peak") or (out.get("omb-max") or {}).get("produce_records_per_sec") or 0
        for fraction in omb_curve.FRACTIONS:
            load(omb_curve.case_name(fraction), peak * fraction, seconds=p.rate_seconds, **omb)
    txn = dict(producers=p.txn_producers, consumers=1, per_txn=p.per_txn, isolation="read_committed",
               seconds=p.txn_seconds)
    if "txn" in p.cases:
        load("txn-max", 0, **txn)
        load("txn-rate", p.txn_rate or half_peak("txn", "txn-max"), **txn)
    rate = p.rate or half_peak("omb", "omb-max") or 1000
    for case in ("failover", "controller-failover"):
        if case not in p.cases:
            continue
        say(f"{case} at {rate:,.0f} records/s")
        try:
            if case == "controller-failover" and "failover" in p.cases:
                say(f"restarting the broker the failover killed: back in every ISR after {restart_killed(cluster, workdir):.1f} s")
            out[case] = failover(cluster, rate, p, wd(case), controller=case == "controller-failover")
        except Exception as e:
            errors.append(f"{case}: {type(e).__name__}: {e}")
            say(f"{case} failed: {e}")


def run(targets: list[str], p: Params, workdir: Path) -> dict[str, Any]:
    from bench.harness.machine import OtherLoad, describe, load_snapshot

    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": describe(),
        "settings": dataclasses.asdict(p) | {"replication_factor": 3, "min_insync_replicas": 2, "acks": "all",
                                               "idempotence": True, "failure_detection_ms": FAILURE_DETECTION_MS},
        "targets": {t: {"cases": {}, "unavailable": None, "errors": []} for t in targets},
        "rates": {},
    }
    # Kafka first: its peaks set the fixed rates that both are offered.
    order = sorted(targets, key=lambda t: t != "apache")
    for target in order:
        entry = result["targets"][target]
        load, other = load_snapshot(), OtherLoad()
        print(f"omb: starting {LABELS[target]}", file=sys.stderr, flush=True)
        try:
            with start_fleet(target, workdir / target) as cluster:
                one_target(cluster, p, result["rates"], workdir / target / "cases", target, entry["cases"],
                           entry["errors"])
        except TargetUnavailable as e:
            entry["unavailable"] = str(e)
            print(f"omb: {LABELS[target]} cannot run: {e}", file=sys.stderr, flush=True)
        except Exception as e:  # recorded; the other target still runs
            entry["errors"].append(f"{type(e).__name__}: {e}")
            print(f"omb: {LABELS[target]} failed: {e}", file=sys.stderr, flush=True)
        entry["machine"] = {"before": load, "other_cores": other.lap()}
    return result


# -- report ---------------------------------------------------------------------------------------
METRICS = [  # (case, key, label, unit, higher is better)
    ("omb-max", "produce_mb_per_sec", "produce throughput, max", "MB/s", True),
    ("omb-max", "consume_mb_per_sec", "consume throughput, max", "MB/s", True),
    ("omb-max", "produce_p99_ms", "produce p99 at max", "ms", False),
    ("omb-max", "e2e_p99_ms", "end-to-end p99 at max", "ms", False),
    ("omb-max", "broker_cpu_s_per_gb", "broker CPU per GB, max (3 brokers)", "s", False),
    ("omb-rate", "produce_mb_per_sec", "produce throughput, fixed rate", "MB/s", True),
    ("omb-rate", "consume_mb_per_sec", "consume throughput, fixed rate", "MB/s", True),
    ("omb-rate", "produce_p50_ms", "produce p50, fixed rate", "ms", False),
    ("omb-rate", "produce_p99_ms", "produce p99, fixed rate", "ms", False),
    ("omb-rate", "produce_p999_ms", "produce p99.9, fixed rate", "ms", False),
    ("omb-rate", "e2e_p50_ms", "end-to-end p50, fixed rate", "ms", False),
    ("omb-rate", "e2e_p99_ms", "end-to-end p99, fixed rate", "ms", False),
    ("omb-rate", "e2e_p999_ms", "end-to-end p99.9, fixed rate", "ms", False),
    ("omb-rate", "broker_cpu_s_per_gb", "broker CPU per GB, fixed rate (3 brokers)", "s", False),
    ("txn-max", "produce_mb_per_sec", "transactional produce throughput, max", "MB/s", True),
    ("txn-max", "consume_mb_per_sec", "read_committed consume throughput, max", "MB/s", True),
    ("txn-max", "commit_p99_ms", "commit_transaction p99, max", "ms", False),
    ("txn-max", "broker_cpu_s_per_gb", "broker CPU per GB, transactions (3 brokers)", "s", False),
    ("txn-rate", "e2e_p50_ms", "read_committed end-to-end p50, fixed rate", "ms", False),
    ("txn-rate", "e2e_p99_ms", "read_committed end-to-end p99, fixed rate", "ms", False),
    ("txn-rate", "e2e_p999_ms", "read_committed end-to-end p99.9, fixed rate", "ms", False),
    ("failover", "before_kill_produce_p99_ms", "failover: produce p99 before the kill", "ms", False),
    ("failover", "after_kill_produce_p99_ms", "failover: produce p99 after the kill", "ms", False),
    ("failover", "after_kill_produce_max_ms", "failover: produce max after the kill", "ms", False),
    ("failover", ("event", "leaderless_s"), "failover: until every partition has a live leader", "s", False),
    ("failover", "lost", "failover: acknowledged records lost (must be 0)", "records", False),
    ("controller-failover", "after_kill_produce_p99_ms", "controller failover: produce p99 after the kill", "ms", False),
    ("controller-failover", ("event", "leaderless_s"), "controller failover: until every partition has a live leader",
     "s", False),
    ("controller-failover", "lost", "controller failover: acknowledged records lost (must be 0)", "records", False),
]


def value(entry: dict[str, Any], case: str, key: Any) -> float | None:
    v: Any = entry.get("cases", {}).get(case)
    for k in (key if isinstance(key, tuple) else (key,)):
        if not isinstance(v, dict):
            return None
        v = v.get(k)
    return float(v) if isinstance(v, (int, float)) else None


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    f, k = result["targets"].get("flotilla", {}), result["targets"].get("apache", {})
    for case, key, label, unit, higher in METRICS:
        fv, kv = value(f, case, key) if f else None, value(k, case, key) if k else None
        ratio = fv / kv if fv is not None and kv else None
        out.append({"case": case, "metric": key if isinstance(key, str) else ".".join(key), "label": label,
                    "unit": unit, "better": "higher" if higher else "lower", "flotilla": fv, "apache": kv,
                    "ratio": ratio})
    return out


def _num(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:,.2f}"


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    lines = [
        "# Production-shaped cases on three brokers: Flotilla / Apache Kafka", "",
        f"Run {result['when']}, `{result.get('command', 'python -m bench omb')}`, on "
        f"{result['machine'].get('cores')} cores ({result['machine'].get('cpu_model')}), clients and all brokers on "
        "the same machine, one round per target (Kafka first: its peaks set the fixed rates both are offered).", "",
        versions_line(result["machine"]), "",
        f"Shape of OMB's `1-topic-100-partitions-1kb-4p-4c`: one topic of {s['partitions']} partitions, replication "
        f"factor 3, min.insync.replicas 2, {s['producers']} producers and {s['consumers']} consumers in one group, "
        f"{s['size']}-byte records (random payloads), acks=all, idempotent, linger.ms {s['linger_ms']}, batch.size "
        f"{s['batch_size']} (OMB's Kafka driver), consumer max.partition.fetch.bytes 10 MiB, no auto-commit "
        "(offsets committed asynchronously about once a second). Clients: confluent-kafka (librdkafka), one process "
        f"each. Scaled down from OMB (1 min warm-up, 5-15 min per test): warm-up {s['warmup_seconds']:g} s at full "
        f"speed (untimed), max {s['max_seconds']:g} s, fixed rate {s['rate_seconds']:g} s; transactions: "
        f"{s['txn_producers']} producers, {s['per_txn']} records per transaction, a read_committed consumer, "
        f"{s['txn_seconds']:g} s at full speed and {s['txn_seconds']:g} s at half Kafka's; failover: the fixed-rate "
        f"load, kill -9 of the broker leading the most partitions (not the active controller) {s['failover_before']:g} s "
        "in, then, once it is back in every ISR, of the active controller (controller failover); produce latency "
        f"after the kill: records in flight at the kill or sent in the {s['failover_after']:g} s after it, before: "
        f"records acknowledged before the kill; failure detection "
        f"{s['failure_detection_ms']} ms on both (Kafka's broker.session.timeout.ms default, Flotilla's Lease).", "",
        "End-to-end latency: the send time (CLOCK_MONOTONIC) travels in the record and is subtracted at consume. "
        "Broker CPU per GB: user + system time of the three broker processes (/proc) over the load, per GB "
        "acknowledged (each GB is also replicated twice and consumed once).", "",
    ]
    rates = result.get("rates", {})
    if rates:
        lines += ["Fixed rates offered to both: " + ", ".join(
            f"{k} {v:,.0f} records/s" for k, v in rates.items()) + ".", ""]
    lines += fleet_table(result["targets"], rows(result), _num)
    lines += [""] + omb_curve.table(result, _num)
    notes = []
    for t, entry in result["targets"].items():
        for case in ("failover", "controller-failover"):
            fo = entry.get("cases", {}).get(case)
            if not fo:
                continue
            ev = fo.get("event", {})
            ctl = ""
            if ev.get("active_controller") is not None:
                ctl = (", the active controller" if ev["active_controller"] == ev.get("victim")
                       else f", not the active controller (node {ev['active_controller']})")
            notes.append(f"{LABELS[t]}, {case}: killed broker {ev.get('victim')} (led {ev.get('victim_led')} of "
                         f"{s['partitions']} partitions{ctl}) {_num(ev.get('killed_after_s'))} s into the load; "
                         f"{fo['acked']:,} records acknowledged, {fo['verify']['records_read']:,} read back "
                         f"({fo['verify']['duplicates']:,} duplicates), {fo['lost']} lost; "
                         f"{fo['delivery_errors']} failed deliveries, {fo['undelivered']} undelivered"
                         + (f"; error: {ev['error']}" if ev.get("error") else ""))
        notes += cores_note(LABELS[t], entry)
    return with_notes(lines, notes)


def chart(result: dict[str, Any], path: Path) -> bool:
    """Flotilla's relative performance per metric (ratio where higher is better, its inverse where
    lower is): right of 1 is where Flotilla did better."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rs = [r for r in rows(result) if r["ratio"] and r["metric"] != "lost"]
    if not rs:
        return False
    labels = [r["label"] for r in rs]
    vals = [r["ratio"] if r["better"] == "higher" else 1 / r["ratio"] for r in rs]
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(rs) + 1.5))
    ax.barh(range(len(rs)), vals, color=["tab:green" if v >= 1 else "tab:red" for v in vals])
    ax.axvline(1, color="black", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rs)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("Flotilla's relative performance (× Kafka; > 1 better)")
    ax.set_title("Three brokers, OMB-shaped load: Flotilla / Apache Kafka 4.1")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(result: dict[str, Any], out: Path, name: str) -> list[Path]:
    paths = write_case(result, out, name, rows, render, chart)
    if omb_curve.chart(result, out / f"{name}-curve.png"):
        paths.append(out / f"{name}-curve.png")
    return paths


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench omb", description="Three brokers each side, OMB-shaped load, failover and transactions: Flotilla / Apache Kafka.")
    d = Params()
    ap.add_argument("--targets", default="flotilla,apache")
    ap.add_argument("--cases", default=None, help="subset of " + ",".join(Params.KNOWN) + " (default "
                    + ",".join(d.cases) + ")")
    ap.add_argument("--smoke", action="store_true", help="a few partitions and seconds: checks the harness")
    ap.add_argument("--rates", action="store_true",
                    help="the latency curve: omb-max, then 10%%, 25%%, 50%%, 75%% of Kafka's peak in turn "
                         "(cases omb,curve unless --cases says otherwise)")
    for f in dataclasses.fields(Params):
        if f.name in ("cases",):
            continue
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(getattr(d, f.name)), default=None)
    ap.add_argument("--out", type=Path, default=None, help="default bench/results (bench/.work/smoke with --smoke)")
    ap.add_argument("--name", default=None, help="file name stem (default omb; omb-smoke with --smoke)")
    ap.add_argument("--render", type=Path, metavar="RESULTS.json", help="only rewrite the markdown and chart")
    args = ap.parse_args(argv)
    if args.render:
        result = json.loads(args.render.read_text())
        write(result, args.render.parent, args.render.stem)
        print(render(result))
        return 0
    p = Params.smoke() if args.smoke else Params()
    for f in dataclasses.fields(Params):
        v = getattr(args, f.name, None)
        if v is not None and f.name != "cases":
            setattr(p, f.name, v)
    cases = args.cases if args.cases is not None else ("omb,curve" if args.rates else ",".join(Params.cases))
    p.cases = tuple(c.strip() for c in cases.split(",") if c.strip())
    bad = [c for c in p.cases if c not in Params.KNOWN]
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if bad or any(t not in FLEETS for t in targets):
        ap.error(f"unknown case or target: {bad or targets}")
    with tempfile.TemporaryDirectory(prefix="bench-omb-") as tmp:
        result = run(targets, p, Path(tmp))
    result["command"] = "python -m bench omb " + " ".join(argv or [])
    out = args.out or (WORK / "smoke" if args.smoke else RESULTS)
    for path in write(result, out, args.name or ("omb-smoke" if args.smoke else "omb")):
        print(f"wrote {path}", file=sys.stderr)
    print(render(result))
    failed = any(e.get("errors") for e in result["targets"].values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
