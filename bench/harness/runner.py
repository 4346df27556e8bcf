"""Runs the cases: per round, per group of cases sharing broker settings, each target in turn.

Order within a round alternates (round 1: Apache Kafka then Flotilla, round 2: Flotilla then Kafka,
...), so that slow drift of the machine's load weighs on both sides alike. Every broker start gets
a fresh data directory. A failing case is recorded (error, broker log tail) and the run goes on; a
broker that died is restarted on fresh data for the remaining cases of its session.
"""

from __future__ import annotations

import statistics
import sys
import threading
import time
import traceback
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.catalog import REGISTRY
from bench.clients import javatools
from bench.harness import machine
from bench.harness.targets import LABELS, Session, apache_available, broker_settings
from bench.workloads.base import Case, Config, Context, warm_up


class Progress:
    """One status line on stderr: workload, target, round, elapsed (in place on a terminal)."""

    def __init__(self, stream=sys.stderr):
        self.stream = stream
        self.tty = stream.isatty()
        self.t_run = time.monotonic()
        self.text = ""
        self.t_case = 0.0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if self.tty:
            self._thread = threading.Thread(target=self._tick, daemon=True, name="progress")
            self._thread.start()

    def _line(self) -> str:
        total = time.monotonic() - self.t_run
        return f"[bench {int(total) // 60}:{int(total) % 60:02d}] {self.text} | {time.monotonic() - self.t_case:5.1f}s"

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            with self._lock:
                if self.text:
                    self.stream.write("\r\033[K" + self._line())
                    self.stream.flush()

    def begin(self, text: str) -> None:
        with self._lock:
            self.text = text
            self.t_case = time.monotonic()
            if self.tty:
                self.stream.write("\r\033[K" + self._line())
            else:
                self.stream.write(self._line() + " start\n")
            self.stream.flush()

    def end(self, outcome: str) -> None:
        with self._lock:
            line = self._line() + f" {outcome}"
            self.stream.write(("\r\033[K" + line + "\n") if self.tty else line + "\n")
            self.stream.flush()
            self.text = ""

    def note(self, text: str) -> None:
        with self._lock:
            self.stream.write(("\r\033[K" if self.tty else "") + text + "\n")
            self.stream.flush()

    def close(self) -> None:
        self._stop.set()


@dataclass
class Options:
    targets: list[str]
    partitions: list[int]
    clients: list[str]
    workloads: list[str]
    repeat: int
    sizes: Any
    workdir: Path
    smoke: bool = False
    fetch: bool = True
    warmup: bool = True
    only: list[str] = field(default_factory=list)  # case id substrings


def _headline(case: Case, res: dict[str, Any]) -> str:
    for m in case.workload.metrics(case):
        if m.primary and isinstance(res.get(m.key), (int, float)):
            return f"{m.label} {res[m.key]:.4g} {m.unit}"
    return "ok"


def run(opts: Options) -> dict[str, Any]:
    progress = Progress()
    started = time.time()
    import re
    import shutil

    if opts.workdir.is_dir():  # broker dirs of an earlier run (this harness's naming only)
        for d in opts.workdir.iterdir():
            if re.match(r"r\d+-p\d+-g\d+-(flotilla|apache)", d.name):
                shutil.rmtree(d, ignore_errors=True) if d.is_dir() else d.unlink()
    notes: list[str] = []
    targets = list(opts.targets)
    if "apache" in targets:
        ok, why = apache_available(opts.fetch)
        if not ok:
            targets.remove("apache")
            notes.append(f"Apache Kafka not run: {why}")
            progress.note(f"[bench] Apache Kafka not run: {why}")
    tools_libs: Path | None = None
    if "java" in opts.clients:
        try:
            tools_libs = javatools.ensure_tools(fetch=opts.fetch)
        except javatools.ToolError as e:
            notes.append(f"Java perf tool cases skipped: {e}")
            progress.note(f"[bench] Java perf tool cases skipped: {e}")

    cfg = Config(partitions=opts.partitions, clients=opts.clients, sizes=opts.sizes, smoke=opts.smoke)
    cases: list[Case] = []
    skipped: list[dict[str, str]] = []
    for name in opts.workloads:
        for case in REGISTRY[name].cases(cfg):
            if opts.only and not any(s in case.id for s in opts.only):
                continue
            why = case.workload.available(case, tools_libs is not None)
            if why:
                skipped.append({"case": case.id, "reason": why})
            else:
                cases.append(case)

    # Groups of cases sharing broker settings; cases without a partition count join every group.
    groups: dict[tuple, list[Case]] = {}
    for case in cases:
        if case.partitions is not None:
            groups.setdefault(case.group_key, [])
    if not groups and cases:
        groups[(opts.partitions[0], ())] = []
    for key in groups:
        groups[key] = sorted(
            [c for c in cases if c.partitions is None or c.group_key == key], key=lambda c: c.workload.order
        )

    shared: dict[Any, Any] = {"apache_disabled": "apache" not in targets}
    samples: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    failures: list[dict[str, Any]] = []
    loads = [dict(machine.load_snapshot(), when="start")]
    others = machine.OtherLoad()
    session_no = 0
    target_commands: dict[str, str] = {}
    warmups: list[dict[str, Any]] = []
    n_sessions = len(groups) * len(targets)

    for rnd in range(1, opts.repeat + 1):
        order = list(reversed(targets)) if rnd % 2 == 1 else list(targets)  # round 1: Kafka first
        if "apache" in order and rnd == 1:
            order = ["apache"] + [t for t in order if t != "apache"]
        for gi, (key, group_cases) in enumerate(groups.items()):
            partitions, extra = key[0], dict(key[1])
            settings = broker_settings(partitions, extra)
            for ti, target in enumerate(order):
                session_no += 1
                label = (f"round {rnd}/{opts.repeat} | {LABELS[target]} | p={partitions}"
                         f" | session {session_no}/{n_sessions * opts.repeat}")
                session = Session(target, opts.workdir / f"r{rnd}-p{partitions}-g{gi}-{target}", settings)
                progress.begin(f"start {label}")
                try:
                    session.start()
                    if session.broker is not None:
                        target_commands.setdefault(target, " ".join(session.broker.command()))
                    progress.end(f"ready in {session.ready_seconds:.2f}s, RSS {session.idle_rss_mb} MB")
                except Exception as e:
                    progress.end("FAILED to start")
                    failures.append({
                        "case": "(broker start)", "target": target, "round": rnd, "partitions": partitions,
                        "error": f"{type(e).__name__}: {e}", "log_tail": session.log_tail(40),
                    })
                    session.close()
                    continue
                try:
                    ctx = Context(session, target, rnd, opts.sizes, shared, tools_libs, progress.note)
                    if opts.warmup and group_cases:
                        progress.begin(f"warm-up | {label}")
                        try:
                            w = warm_up(ctx, partitions)
                            warmups.append({"target": target, "round": rnd, "partitions": partitions, **w})
                            progress.end(f"done: {w['rounds']} round(s), broker CPU per round {w['broker_cpu_per_round']} s")
                        except Exception as e:
                            progress.end(f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                            failures.append({
                                "case": "(warm-up)", "target": target, "round": rnd, "partitions": partitions,
                                "error": f"{type(e).__name__}: {e}", "broker_alive_after": session.alive(),
                                "log_tail": session.log_tail(40),
                            })
                            if not session.alive():
                                session.restart_fresh()
                    for case in _round_order(group_cases, rnd):
                        ctx = Context(session, target, rnd, opts.sizes, shared, tools_libs, progress.note)
                        progress.begin(f"{case.id} | {label}")
                        try:
                            res = case.workload.run(ctx, case)
                            res["round"] = rnd
                            samples[case.id][target].append(res)
                            if isinstance(res.get("broker_rss_peak_mb"), (int, float)):
                                ctx.session_state.setdefault("rss_peaks", []).append(res["broker_rss_peak_mb"])
                            progress.end(_headline(case, res))
                        except Exception as e:
                            progress.end(f"FAILED: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                            alive = session.alive()
                            failures.append({
                                "case": case.id, "target": target, "round": rnd, "partitions": partitions,
                                "error": f"{type(e).__name__}: {e}",
                                "traceback": traceback.format_exc(limit=4)[-3000:],
                                "broker_alive_after": alive, "broker_exit_code": session.exit_code(),
                                "log_tail": session.log_tail(40),
                            })
                            if not alive:
                                progress.note(f"[bench] {LABELS[target]} broker died; restarting on fresh data")
                                try:
                                    session.restart_fresh()
                                except Exception as e2:
                                    failures.append({"case": "(broker restart)", "target": target, "round": rnd,
                                                     "partitions": partitions, "error": f"{type(e2).__name__}: {e2}",
                                                     "log_tail": session.log_tail(40)})
                                    break
                finally:
                    session.close()
        loads.append(dict(machine.load_snapshot(), when=f"after round {rnd}",
                          other_processes_cores=others.lap()))
    progress.close()

    return {
        "schema": 1,
        "smoke": opts.smoke,
        "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "duration_seconds": round(time.time() - started, 1),
        "targets": targets,
        "target_commands": target_commands,
        "settings": {
            "repeat": opts.repeat,
            "partitions": opts.partitions,
            "clients": opts.clients,
            "sizes": vars(opts.sizes),
            "broker_settings": {str(p): broker_settings(p) for p in opts.partitions},
            "latency_rates": {str(k[1]): {"records_per_sec": v[0], "basis": v[1]}
                              for k, v in shared.items() if isinstance(k, tuple) and k[0] == "latency_rate"},
            "sessions_per_round": n_sessions,
        },
        "load": loads,
        "notes": notes,
        "skipped": skipped,
        "results": summarize(cases, samples, targets),
        "warmups": warmups,
        "failures": failures,
    }


def _round_order(cases: list[Case], rnd: int) -> list[Case]:
    """Cases by workload order; within a workload, reversed in even rounds, so that no case always
    runs first (on a broker that has seen the least traffic) or last."""
    if rnd % 2 == 1:
        return cases
    out: list[Case] = []
    for order in sorted({c.workload.order for c in cases}):
        out += list(reversed([c for c in cases if c.workload.order == order]))
    return out


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def summarize(cases: list[Case], samples: dict, targets: list[str]) -> list[dict[str, Any]]:
    out = []
    for case in cases:
        per_target = samples.get(case.id, {})
        for i, m in enumerate(case.workload.metrics(case)):
            vals = {t: [r[m.key] for r in per_target.get(t, []) if isinstance(r.get(m.key), (int, float))]
                    for t in targets}
            med = {t: _median(v) for t, v in vals.items()}
            f, k = med.get("flotilla"), med.get("apache")
            ratio = f / k if f is not None and k not in (None, 0) else None
            # Ratios of the same round (taken minutes apart at most): their spread says how stable
            # the comparison is, whatever the machine's load did between rounds.
            by_round = {t: {r["round"]: r[m.key] for r in per_target.get(t, []) if isinstance(r.get(m.key), (int, float))}
                        for t in ("flotilla", "apache")}
            paired = [by_round["flotilla"][n] / by_round["apache"][n] for n in sorted(by_round["flotilla"])
                      if by_round["apache"].get(n)]
            relative = None
            if ratio is not None and ratio > 0:
                relative = ratio if m.better == "higher" else 1 / ratio
            out.append({
                "case": case.id,
                "workload": case.workload.name,
                "title": case.title,
                "client": case.client,
                "partitions": case.partitions,
                "params": case.params,
                "metric": m.key,
                "label": m.label,
                "unit": m.unit,
                "better": m.better,
                "primary": m.primary,
                "samples": vals,
                "median": med,
                "ratio_flotilla_over_kafka": ratio,
                "ratio_per_round": [round(x, 4) for x in paired],
                "flotilla_relative_performance": relative,
                "runs": {t: [{k2: v2 for k2, v2 in r.items() if k2 != "command"} for r in per_target.get(t, [])]
                         for t in targets} if i == 0 else None,
                "commands": sorted({r.get("command", "") for t in targets for r in per_target.get(t, [])} - {""})[:2]
                if i == 0 else None,
            })
    return out

