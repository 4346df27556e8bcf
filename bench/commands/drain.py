"""`python -m bench drain`: the time to drain one broker holding `--size-mib` (default 2 GiB) of
partition data onto the other two, without and with a KIP-73 replication throttle, and what a
steady acks=all producer's latency does meanwhile; Flotilla (three brokers on the test control
plane) against a 3-node Apache Kafka 4.1 (KRaft), one after the other in one run (issue 24).

Per target, on one fleet start (bench/commands/omb.py's fleets, from bench/harness/fleets.py; both number their brokers 1..3):

1. a topic of `--partitions` partitions, replication factor 2, created with manual replica
   assignments that put broker 3 in every partition (bench/commands/drain_plan.py: it leads half of them),
   filled with `--size-mib` MiB by Kafka's ProducerPerformance (acks=all, 8 KiB records), every
   replica in the ISR; broker 3's share is measured from its segment files;
2. a librdkafka producer (bench/clients/omb_client.py, idempotent, acks=all, 1 KiB records, linger.ms 5)
   sends `--rate` records/s into that topic until the end, each record's send-to-ack latency kept;
3. after `--before` seconds, the drain: Kafka 4.1's own `kafka-reassign-partitions.sh --execute`
   (kafka-tools jars, as a user would) with the plan that replaces broker 3 by the other broker in
   each partition; timed from starting the tool until ListPartitionReassignments lists nothing for
   the topic and Metadata shows every partition with exactly the planned replicas, all in the
   ISR, and a leader among them;
4. the move back (the same tool, the original layout, untimed, its samples left out), then
   `--before` seconds of steady state again;
5. the same drain with `--throttle` (bytes/s, default 50 MiB/s): `--execute --throttle`, which sets
   `leader/follower.replication.throttled.rate` on the brokers of the move and the topic's
   `leader/follower.replication.throttled.replicas`; `--verify` clears them afterwards (untimed).

Reported per case: drain time, bytes moved per second, broker CPU, the producer's p50/p99/p99.9
in the `--before` seconds before the move and during it, and during it apart from the records sent
from 1 s before to 3 s after a partition's leader changed (polled every 0.2 s while the move runs); for the throttled case the least time the
throttle allows (drain_plan.throttle_floor). Results: bench/results/<name>.{json,md,png}
(bench/commands/drain_report.py); ratios are Flotilla / Kafka. A target that cannot run says why.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any


from bench import REPO_ROOT, RESULTS, WORK
from bench.commands import drain_plan, drain_report
from bench.harness.fleets import FLEETS, TargetUnavailable, fleet_cpu
from bench.harness.targets import LABELS

MIB = 1024 * 1024
REPLICATION_FACTOR = 2


@dataclasses.dataclass
class Params:
    size_mib: int = 2048  # partition data the drained broker holds
    partitions: int = 8
    throttle: int = 50 * MIB  # bytes/s per broker and direction, as --throttle takes it
    rate: float = 1000  # records/s of the steady producer
    size: int = 1024  # its record size
    before: float = 15  # seconds of steady state measured before each drain
    fill_record_size: int = 8192
    drain_timeout: float = 1800

    @classmethod
    def smoke(cls) -> "Params":
        return cls(size_mib=200, before=5)


def _say(target: str, what: str) -> None:
    print(f"drain: {LABELS[target]}: {what} ({time.strftime('%H:%M:%S')})", file=sys.stderr, flush=True)


# -- the cluster, through the wire ---------------------------------------------------------------
def create_topic(bootstrap: str, topic: str, layout: drain_plan.Layout) -> None:
    """CreateTopics with manual replica assignments (as `kafka-topics.sh --replica-assignment`)."""
    from kio.schema.create_topics.v7.request import CreatableReplicaAssignment, CreatableTopic, CreateTopicsRequest
    from kio.static.primitive import i16, i32

    from flotilla.testenv import kafka_wire

    with kafka_wire.connect(bootstrap, timeout=60) as conn:
        resp = conn.request(CreateTopicsRequest(
            topics=(CreatableTopic(
                name=topic, num_partitions=i32(-1), replication_factor=i16(-1),
                assignments=tuple(CreatableReplicaAssignment(partition_index=i32(p), broker_ids=tuple(i32(r) for r in rs))
                                  for p, rs in sorted(layout.items())),
                configs=()),),
            timeout=datetime.timedelta(seconds=60), validate_only=False))
    t = resp.topics[0]
    if int(t.error_code) != 0:
        raise TargetUnavailable(f"CreateTopics {topic} with replica assignments answered {t.error_code!r}: "
                                f"{t.error_message}")


def partition_states(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], set[int]]]:
    """partition -> (leader, replicas, ISR) as one broker's Metadata says."""
    from flotilla.testenv import kafka_wire

    with kafka_wire.connect(bootstrap, timeout=10) as conn:
        t = conn.metadata([topic]).topics[0]
    return {int(p.partition_index): (int(p.leader_id), [int(r) for r in p.replica_nodes], {int(r) for r in p.isr_nodes})
            for p in t.partitions}


def reassigning(bootstrap: str, topic: str) -> list[int] | None:
    """The topic's partitions the controller lists as being reassigned (ListPartitionReassignments
    to the controller Metadata names, as Kafka's admin client sends it); None if it could not tell."""
    from kio.schema.list_partition_reassignments.v0.request import ListPartitionReassignmentsRequest

    from flotilla.testenv import kafka_wire

    with kafka_wire.connect(bootstrap, timeout=10) as conn:
        md = conn.metadata([])
        controller = {int(b.node_id): f"{b.host}:{int(b.port)}" for b in md.brokers}.get(int(md.controller_id))
    if controller is None:
        return None
    with kafka_wire.connect(controller, timeout=10) as conn:
        resp = conn.request(ListPartitionReassignmentsRequest(topics=None))
    if int(resp.error_code) != 0:
        return None
    return sorted(int(p.partition_index) for t in resp.topics if t.name == topic for p in t.partitions)


def settled(bootstrap: str, topic: str, want: drain_plan.Layout) -> tuple[bool, Any]:
    """Whether nothing of the topic is being reassigned and every partition has exactly the
    replicas of `want`, all in the ISR, and a leader among them; and what was seen."""
    moving = reassigning(bootstrap, topic)
    states = partition_states(bootstrap, topic)
    ok = moving == [] and all(
        p in states and set(states[p][1]) == set(rs) and len(states[p][1]) == len(rs)
        and states[p][2] == set(rs) and states[p][0] in rs for p, rs in want.items())
    return ok, {"reassigning": moving, "states": {p: (s[0], s[1], sorted(s[2])) for p, s in states.items()}}


def wait_settled(bootstrap: str, topic: str, want: drain_plan.Layout, timeout: float, poll: float = 0.2,
                 leaders_seen: list[tuple[float, dict[int, int]]] | None = None) -> float:
    """Polls `settled` until true; the monotonic time it was first seen true. Each poll's
    partition -> leader is appended to `leaders_seen` if given (when leaders changed)."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            ok, last = settled(bootstrap, topic, want)
            if leaders_seen is not None:
                leaders_seen.append((time.monotonic(), {p: s[0] for p, s in last["states"].items()}))
            if ok:
                return time.monotonic()
        except (OSError, EOFError, ValueError, RuntimeError) as e:
            last = repr(e)
        time.sleep(poll)
    raise RuntimeError(f"{topic}: not settled at {want} within {timeout:.0f}s (last seen: {last})")


def topic_bytes(log_dir: Path, topic: str) -> dict[int, int]:
    """partition -> bytes of its segment files (*.log) in one broker's log directory (directories
    Kafka renamed for deletion, `<topic>-<p>.<id>-delete`, are not the partition's)."""
    out: dict[int, int] = {}
    for d in Path(log_dir).glob(f"{topic}-*"):
        suffix = d.name[len(topic) + 1:]
        if not suffix.isdigit():
            continue
        total = 0
        try:
            for f in d.glob("*.log"):
                try:
                    total += f.stat().st_size
                except FileNotFoundError:  # a segment deleted (or the directory renamed) meanwhile
                    pass
        except OSError:
            continue
        out[int(suffix)] = total
    return out


def tail(path: Path, n: int = 2000) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return f"({path} unreadable)"


def reassign_tool(bootstrap: str, workdir: Path, *args: str, timeout: float = 300) -> str:
    """Kafka 4.1's kafka-reassign-partitions.sh (ReassignPartitionsCommand from the kafka-tools
    jars); its stdout, or RuntimeError with both streams."""
    from flotilla.testenv.brokers import kafka_tools

    config = workdir / "admin.properties"
    config.write_text("request.timeout.ms=30000\ndefault.api.timeout.ms=120000\n")
    proc = subprocess.run(kafka_tools.command("reassign.ReassignPartitionsCommand", "--bootstrap-server", bootstrap,
                                              "--command-config", str(config), *args),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"kafka-reassign-partitions {' '.join(args[-3:])} exited {proc.returncode}: "
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc.stdout


# -- one move ------------------------------------------------------------------------------------
class Growth:
    """Samples, every 0.5 s while open, the bytes of the topic's segment files on each watched
    broker: the brokers receiving replicas show how fast they arrive (drain_plan.peak_rate)."""

    def __init__(self, dirs: dict[int, Path], topic: str) -> None:
        self.dirs, self.topic = dirs, topic
        self.samples: dict[int, list[tuple[float, int]]] = {n: [] for n in dirs}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="drain-growth", daemon=True)

    def _run(self) -> None:
        while True:
            for n, d in self.dirs.items():
                try:
                    self.samples[n].append((time.monotonic(), sum(topic_bytes(d, self.topic).values())))
                except OSError:  # a file deleted while listed
                    pass
            if self._stop.wait(0.5):
                return

    def __enter__(self) -> "Growth":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def peaks(self, span: float = 5.0) -> dict[int, float | None]:
        return {n: drain_plan.peak_rate(xs, span) for n, xs in self.samples.items()}


def move(cluster: Any, topic: str, target: drain_plan.Layout, workdir: Path, name: str, p: Params,
         throttle: int = 0, watch: dict[int, Path] | None = None) -> dict[str, Any]:
    """Starts the reassignment to `target` with the tool (`--throttle` if given) and waits until it
    has settled; times, the brokers' CPU, and how fast the `watch`ed brokers' copies grew."""
    bootstrap = cluster.brokers[0].bootstrap
    path = workdir / f"{name}.json"
    path.write_text(json.dumps(drain_plan.plan_json(topic, target)))
    args = ["--reassignment-json-file", str(path), "--execute"]
    if throttle:
        args += ["--throttle", str(throttle)]
    cpu0 = fleet_cpu(cluster)
    leaders_seen = [(time.monotonic(), {q: s[0] for q, s in partition_states(bootstrap, topic).items()})]
    with Growth(watch or {}, topic) as growth:
        t0 = time.monotonic()
        out = reassign_tool(bootstrap, workdir, *args)
        started = time.monotonic()
        if "Successfully started partition reassignment" not in out:
            raise RuntimeError(f"kafka-reassign-partitions --execute did not start the move: {out[-2000:]}")
        done = wait_settled(bootstrap, topic, target, p.drain_timeout, leaders_seen=leaders_seen)
    result = {"start": t0, "end": done, "seconds": done - t0, "tool_seconds": started - t0,
              "seconds_after_tool": done - started, "broker_cpu_s": fleet_cpu(cluster) - cpu0,
              "tool_output": out[-1500:], "leader_changes": drain_plan.leader_changes(leaders_seen)}
    if watch:
        peaks = growth.peaks()
        result["peak_5s_bytes_per_sec"] = peaks
        known = [v for v in peaks.values() if v is not None]
        result["peak_5s_mib_per_sec"] = max(known) / MIB if known else None
    if throttle:
        verify = reassign_tool(bootstrap, workdir, "--reassignment-json-file", str(path), "--verify")
        result["verify_output"] = verify[-1500:]
        result["throttle_cleared"] = "Clearing broker-level throttles" in verify
    return result


def one_target(cluster: Any, target: str, p: Params, workdir: Path, out: dict[str, Any]) -> None:
    """Both drains on one fleet, into `out`."""
    from bench.clients import javatools
    from bench.harness.samples import percentiles, read_samples

    workdir.mkdir(parents=True, exist_ok=True)
    nodes = sorted(b.node_id for b in cluster.brokers)
    victim = nodes[-1]
    layout = drain_plan.initial_layout(nodes, p.partitions)
    plan = drain_plan.drain_plan(layout, victim, nodes)
    bootstrap = cluster.brokers[0].bootstrap
    topic = f"drain-{uuid.uuid4().hex[:8]}"
    out.update({"topic": topic, "nodes": nodes, "victim": victim, "layout": layout, "plan": plan})
    create_topic(bootstrap, topic, layout)
    wait_settled(bootstrap, topic, layout, 120)

    records = max(1, p.size_mib * MIB // p.fill_record_size)
    _say(target, f"filling {topic} with {records:,} records of {p.fill_record_size} bytes")
    t = time.monotonic()
    fill = javatools.producer_performance(cluster.bootstrap, topic, records, p.fill_record_size, acks="all",
                                          batch_size=1048576, linger_ms=5, timeout=3600)
    wait_settled(bootstrap, topic, layout, 300)
    out["fill"] = {k: fill[k] for k in ("records", "records_per_sec", "mb_per_sec")} | {"seconds": time.monotonic() - t}
    victim_dir = Path(cluster.broker(victim).log_dirs)

    watch = {n: Path(cluster.broker(n).log_dirs) for n in nodes if n != victim}
    stop = workdir / "stop"
    start_at = time.monotonic() + 3.0
    # stderr to a file: librdkafka's log lines over minutes of moves could fill a pipe and stall it.
    stderr = open(workdir / "producer.stderr", "w")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")]))
    producer = subprocess.Popen(
        [sys.executable, "-m", "bench.clients.omb_client", "producer", cluster.bootstrap, topic, "--id", "0",
         "--seconds", "36000", "--rate", str(p.rate), "--start-at", str(start_at), "--size", str(p.size),
         "--linger-ms", "5", "--batch-size", "65536", "--out", str(workdir), "--timeout", "120",
         "--tolerate-errors", "--stop-file", str(stop)],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    cases: dict[str, Any] = {}
    errors = out.setdefault("errors", [])
    produced: dict[str, Any] = {}
    try:
        time.sleep(max(0.0, start_at + 2.0 + p.before - time.monotonic()))  # 2 s to settle, then `before`
        for name, throttle in (("unthrottled", 0), ("throttled", p.throttle)):
            try:
                if producer.poll() is not None:
                    raise RuntimeError(f"the steady producer exited early: {tail(workdir / 'producer.stderr')}")
                sizes = topic_bytes(victim_dir, topic)
                leaders = {q: s[0] for q, s in partition_states(bootstrap, topic).items()}
                _say(target, f"{name} drain of broker {victim} ({sum(sizes.values()) / MIB:,.0f} MiB)")
                case = move(cluster, topic, plan, workdir, name, p, throttle, watch)
                case["victim_bytes"] = sum(sizes.values())
                case["victim_bytes_after"] = sum(topic_bytes(victim_dir, topic).values())
                case["leaders_before"] = leaders
                case["mib_per_sec"] = case["victim_bytes"] / MIB / case["seconds"]
                case["broker_cpu_s_per_gib"] = case["broker_cpu_s"] / (case["victim_bytes"] / 1024 ** 3)
                if throttle:
                    case["throttle"] = throttle
                    case.update(drain_plan.throttle_floor(leaders, layout, plan, sizes, throttle))
                    case["seconds_over_floor"] = case["seconds"] / case["floor_s"] if case["floor_s"] else None
                cases[name] = case
                if name == "unthrottled":
                    _say(target, "moving back (untimed)")
                    back = move(cluster, topic, layout, workdir, "back", p)
                    out["move_back"] = {k: back[k] for k in ("start", "end", "seconds")}
                    time.sleep(2.0 + p.before)
            except Exception as e:  # recorded; what was measured before it is still reported
                errors.append(f"{name}: {type(e).__name__}: {e}")
                _say(target, f"{name} failed: {e}")
                break
    finally:
        stop.write_text("")
        try:
            stdout, _ = producer.communicate(timeout=300)
        except subprocess.TimeoutExpired:
            producer.kill()
            stdout, _ = producer.communicate()
            errors.append(f"the steady producer did not stop within 300 s: {tail(workdir / 'producer.stderr')}")
        stderr.close()
    if producer.returncode == 0:
        produced = json.loads(stdout.strip().splitlines()[-1])
    else:
        errors.append(f"the steady producer exited {producer.returncode}: {tail(workdir / 'producer.stderr')}")
    sent_at, lat = read_samples(workdir / "producer-0.sent"), read_samples(workdir / "producer-0.lat")
    for name, case in cases.items():
        before = drain_plan.window(sent_at, lat, case["start"] - p.before, case["start"])
        # During: from the tool's return (the move under way) until settled; the tool's own JVM start
        # competes with the producer for the 2 cores, so the window that includes it is kept apart.
        during = drain_plan.window(sent_at, lat, case["start"] + case["tool_seconds"], case["end"])
        case.update(percentiles(before, "before"))
        case.update(percentiles(during, "during"))
        case.update(percentiles(drain_plan.window(sent_at, lat, case["start"], case["end"]), "during_incl_tool"))
        case["before_records"], case["during_records"] = len(before), len(during)
        # Is a p99 jump the copy or the leader changes (the producer waits for each new leader)?
        near, away = drain_plan.split_near(sent_at, lat, case["start"] + case["tool_seconds"], case["end"],
                                           case.get("leader_changes", []))
        case.update(percentiles(away, "during_away"))
        case["during_near_leader_change_records"], case["leader_change_count"] = len(near), len(case.get("leader_changes", []))
        case.update(percentiles(near, "during_near"))
        if case.get("before_p99_ms") and case.get("during_p99_ms") is not None:
            case["during_over_before_p99"] = case["during_p99_ms"] / case["before_p99_ms"]
    out["producer"] = {k: produced.get(k) for k in ("sent", "acked", "errors", "first_errors", "undelivered")}
    out["cases"] = cases


def run(targets: list[str], p: Params, workdir: Path) -> dict[str, Any]:
    from bench.commands.omb import start_fleet  # the same fleets as the OMB-shaped cases
    from bench.harness.machine import OtherLoad, describe, load_snapshot

    result: dict[str, Any] = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": describe(),
        "settings": dataclasses.asdict(p) | {"replication_factor": REPLICATION_FACTOR, "acks": "all",
                                               "idempotence": True, "linger_ms": 5},
        "targets": {t: {"unavailable": None, "errors": []} for t in targets},
    }
    for target in targets:
        entry = result["targets"][target]
        load, other = load_snapshot(), OtherLoad()
        _say(target, "starting three brokers")
        tdir = workdir / target
        try:
            with start_fleet(target, tdir) as cluster:
                one_target(cluster, target, p, tdir / "case", entry)
        except TargetUnavailable as e:
            entry["unavailable"] = str(e)
            _say(target, f"cannot run: {e}")
        except Exception as e:  # recorded; the other target still runs
            entry["errors"].append(f"{type(e).__name__}: {e}")
            _say(target, f"failed: {e}")
        finally:
            shutil.rmtree(tdir, ignore_errors=True)  # several GiB of logs per target
        entry["machine"] = {"before": load, "other_cores": other.lap()}
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench drain", description=(
        "Drain one of three brokers holding 2 GiB, without and with a replication throttle, under a steady "
        "acks=all producer: Flotilla / Apache Kafka."))
    d = Params()
    ap.add_argument("--targets", default="apache,flotilla")
    ap.add_argument("--smoke", action="store_true", help="200 MiB and 5 s windows: checks the harness")
    helps = {"size_mib": "MiB of partition data the drained broker holds (default 2048; 200 with --smoke)",
             "partitions": "partitions of the topic (default 8)",
             "throttle": "bytes/s of the throttled drain, as --throttle of kafka-reassign-partitions (default 50 MiB/s)",
             "rate": "records/s of the steady acks=all producer (default 1000)",
             "size": "record size of the steady producer (default 1024)",
             "before": "seconds of steady state measured before each drain (default 15; 5 with --smoke)",
             "fill_record_size": "record size of the fill (default 8192)",
             "drain_timeout": "seconds a drain may take before the run gives up (default 1800)"}
    for f in dataclasses.fields(Params):
        ap.add_argument("--" + f.name.replace("_", "-"), type=type(getattr(d, f.name)), default=None,
                        help=helps.get(f.name))
    ap.add_argument("--out", type=Path, default=None, help="default bench/results (bench/.work/smoke with --smoke)")
    ap.add_argument("--name", default=None, help="file name stem (default drain; drain-smoke with --smoke)")
    ap.add_argument("--workdir", type=Path, default=None, help="where the brokers' logs go (default a temporary "
                    "directory); needs about 3 × --size-mib per target, deleted after each")
    ap.add_argument("--render", type=Path, metavar="RESULTS.json", help="only rewrite the markdown and chart")
    args = ap.parse_args(argv)
    if args.render:
        result = json.loads(args.render.read_text())
        drain_report.write(result, args.render.parent, args.render.stem)
        print(drain_report.render(result))
        return 0
    p = Params.smoke() if args.smoke else Params()
    for f in dataclasses.fields(Params):
        v = getattr(args, f.name, None)
        if v is not None:
            setattr(p, f.name, v)
    targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if not targets or any(t not in FLEETS for t in targets):
        ap.error(f"unknown target in {targets} (flotilla, apache)")
    from flotilla.testenv.brokers import kafka_tools

    kafka_tools.ensure_libs()
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bench-drain-", dir=args.workdir) as tmp:
        result = run(targets, p, Path(tmp))
    result["command"] = "python -m bench drain " + " ".join(argv or [])
    out = args.out or (WORK / "smoke" if args.smoke else RESULTS)
    for path in drain_report.write(result, out, args.name or ("drain-smoke" if args.smoke else "drain")):
        print(f"wrote {path}", file=sys.stderr)
    print(drain_report.render(result))
    return 1 if any(e.get("errors") for e in result["targets"].values()) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
