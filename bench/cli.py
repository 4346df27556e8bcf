"""`python -m bench`: run the side-by-side comparison and write bench/results/."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from bench.catalog import COMMANDS, REGISTRY
from bench.harness import machine, report, runner
from bench.workloads.base import Sizes

BENCH_DIR = Path(__file__).resolve().parent


def _ints(s: str) -> list[int]:
    return [int(x) for x in s.split(",") if x.strip()]


def _names(s: str) -> list[str]:
    return [x.strip() for x in s.split(",") if x.strip()]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="python -m bench",
        description="Flotilla and Apache Kafka side by side: same machine, same clients, same workloads, "
                    "alternating; medians and Flotilla/Kafka ratios.",
        epilog="Harnesses of their own: " + "; ".join(f"python -m bench {n}: {what}" for n, (_, what) in COMMANDS.items()),
    )
    ap.add_argument("--repeat", type=int, default=None, help="rounds per target (default 3; 1 with --smoke)")
    ap.add_argument("--targets", type=_names, default=None, help="flotilla,apache (default both; flotilla with --smoke"
                    " unless Apache Kafka's jars are cached)")
    ap.add_argument("--partitions", type=_ints, default=None, help="partition counts, e.g. 1,32 (default; 1 with --smoke)")
    ap.add_argument("--clients", type=_names, default=["java", "librdkafka"], help="java,librdkafka (default both)")
    ap.add_argument("--workloads", type=_names, default=None, help=f"subset of: {','.join(REGISTRY)} (default all;"
                    " with --smoke all but those with a slow start-up of their own: pipeline)")
    ap.add_argument("--only", type=_names, default=[], help="run only cases whose id contains one of these strings")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply record counts (default 1.0)")
    ap.add_argument("--metadata-topics", type=int, default=None, help="topics in the broker for the metadata case"
                    " (default 10000)")
    ap.add_argument("--catchup-records", type=int, default=None, help="backlog of the catch-up case"
                    " (default 500000)")
    ap.add_argument("--smoke", action="store_true", help="tiny record counts: checks the harness, measures nothing")
    ap.add_argument("--no-fetch", action="store_true", help="never download jars; skip what is not cached")
    ap.add_argument("--no-warmup", action="store_true", help="skip the untimed warm-up of each broker session")
    ap.add_argument("--out", type=Path, default=None, help="results directory (default bench/results;"
                    " bench/.work/smoke with --smoke)")
    ap.add_argument("--name", default=None, help="results file name stem (default comparison; smoke with --smoke)")
    ap.add_argument("--workdir", type=Path, default=BENCH_DIR / ".work" / "runs", help="broker data directories")
    ap.add_argument("--list", action="store_true", help="list workloads and cases, then exit")
    ap.add_argument("--render", type=Path, metavar="RESULTS.json",
                    help="only rewrite the markdown and chart next to an existing results JSON")
    return ap


def main(argv: list[str]) -> int:
    if argv[:1] and argv[0] in COMMANDS:  # a harness of its own (bench/catalog.py's COMMANDS)
        import importlib

        return importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])
    args = parser().parse_args(argv)
    if args.workloads is None:
        args.workloads = [w for w in REGISTRY if not (args.smoke and REGISTRY[w].slow_start)]
    if args.render:
        import json

        data = json.loads(args.render.read_text())
        paths = report.write(data, args.render.parent, args.render.stem)
        print(report.markdown(data))
        for kind, p in paths.items():
            print(f"{kind}: {p}", file=sys.stderr)
        return 0
    unknown = [w for w in args.workloads if w not in REGISTRY]
    if unknown:
        print(f"unknown workload(s) {unknown}; known: {', '.join(REGISTRY)}", file=sys.stderr)
        return 2
    sizes = Sizes.smoke() if args.smoke else Sizes()
    if args.scale != 1.0:
        sizes = sizes.scaled(args.scale)
    if args.metadata_topics:
        sizes = dataclasses.replace(sizes, metadata_topics=args.metadata_topics)
    if args.catchup_records:
        sizes = dataclasses.replace(sizes, catchup_backlog=args.catchup_records)
    partitions = args.partitions or ([1] if args.smoke else [1, 32])
    if args.targets is None:
        targets = ["flotilla", "apache"]
        if args.smoke:
            from flotilla.testenv.brokers.apache_kafka import kafka_home

            if not (kafka_home() / ".complete").exists():
                targets = ["flotilla"]
    else:
        targets = args.targets
    bad = [t for t in targets if t not in ("flotilla", "apache")]
    if bad or not targets:
        print(f"unknown target(s) {bad}; known: flotilla, apache", file=sys.stderr)
        return 2
    if args.list:
        from bench.workloads.base import Config

        cfg = Config(partitions=partitions, clients=args.clients, sizes=sizes, smoke=args.smoke)
        for name in args.workloads:
            w = REGISTRY[name]
            print(f"{name}: {w.description}")
            for c in w.cases(cfg):
                print(f"    {c.id}")
        print("\nHarnesses of their own (python -m bench <name> --help):")
        for name, (_, what) in COMMANDS.items():
            print(f"{name}: {what}")
        return 0
    opts = runner.Options(
        targets=targets,
        partitions=partitions,
        clients=args.clients,
        workloads=args.workloads,
        repeat=args.repeat or (1 if args.smoke else 3),
        sizes=sizes,
        workdir=args.workdir,
        smoke=args.smoke,
        fetch=not args.no_fetch,
        warmup=not args.no_warmup,
        only=args.only,
    )
    data = {"machine": machine.describe()}
    data.update(runner.run(opts))
    data["command"] = "python -m bench " + " ".join(argv)
    out = args.out or (BENCH_DIR / ".work" / "smoke" if args.smoke else BENCH_DIR / "results")
    name = args.name or ("smoke" if args.smoke else "comparison")
    paths = report.write(data, out, name)
    print(report.markdown(data))
    for kind, p in paths.items():
        print(f"{kind}: {p}", file=sys.stderr)
    return 0
