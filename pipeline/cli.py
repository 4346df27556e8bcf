"""`python -m pipeline generate|run|batch|results|jars`: the pipeline's command line."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path


def _topics(args):
    from pipeline.topics import Topics

    return Topics(raw=args.raw_topic, output=args.output_topic, dead_letter=args.dead_letter_topic,
                  raw_partitions=args.partitions, replication_factor=args.replication_factor)


def _windowing(args):
    from pipeline.transform import Windowing

    return Windowing(window=args.window, watermark_delay=args.watermark)


def _common(p: argparse.ArgumentParser, spark: bool = False) -> None:
    p.add_argument("--bootstrap", default="127.0.0.1:9092", help="broker bootstrap address (default %(default)s)")
    p.add_argument("--raw-topic", default="events")
    p.add_argument("--output-topic", default="event-aggregates")
    p.add_argument("--dead-letter-topic", default="events-dead-letter")
    p.add_argument("--partitions", type=int, default=3, help="partitions of the raw topic when it is created")
    p.add_argument("--replication-factor", type=int, default=1, help="of the topics the pipeline creates")
    if spark:
        p.add_argument("--master", default="local[2]")
        p.add_argument("--window", default="10 seconds", help="event-time window length")
        p.add_argument("--watermark", default="20 seconds", help="how late an event may arrive")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    g = sub.add_parser("generate", help="write click/purchase events to the raw topic")
    _common(g)
    g.add_argument("--count", type=int, default=10_000)
    g.add_argument("--first", type=int, default=None,
                   help="index of the first event (default: the number of records already in the raw topic,"
                        " so a second run continues the first one's simulated clock)")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--malformed-every", type=int, default=0, metavar="N",
                   help="make about 1 in N events malformed (0: none)")
    g.add_argument("--rate", type=float, default=0.0, help="events per second (0: as fast as possible)")
    g.add_argument("--step-ms", type=int, default=50, help="simulated event time between events")

    r = sub.add_parser("run", help="run the streaming job until Ctrl-C / SIGTERM")
    _common(r, spark=True)
    r.add_argument("--checkpoint", type=Path, default=Path("pipeline-checkpoint"),
                   help="where the queries keep offsets and state (default %(default)s); keep it to resume")
    r.add_argument("--trigger", default="2 seconds", help="micro-batch interval")
    r.add_argument("--max-offsets-per-trigger", type=int, default=10_000,
                   help="cap on records per micro-batch (default %(default)s; 0: none)")
    r.add_argument("--stop-when-idle", type=float, default=0.0, metavar="SECONDS",
                   help="stop once both queries have caught up and stayed idle this long")
    r.add_argument("--commit-group", default="flotilla-pipeline",
                   help="consumer group that gets the raw offsets both queries have finished with ('' for none)")
    r.add_argument("--catch-up", choices=["off", "parallel"], default="off",
                   help="parallel: after a restart with a backlog the dead-letter query starts at the log end"
                        " and a bounded job processes the gap beside it; the aggregates query keeps order"
                        " (docs/pipeline.md, 'Catch-up mode')")
    r.add_argument("--catch-up-chunk", type=int, default=10_000, metavar="OFFSETS",
                   help="offsets per partition per Spark job of the gap (default %(default)s)")
    r.add_argument("--json", action="store_true", help="progress as JSON lines")

    b = sub.add_parser("batch", help="recompute the aggregates from the whole raw topic")
    _common(b, spark=True)
    b.add_argument("--out", type=Path, help="write {key: value} JSON here instead of printing rows")

    s = sub.add_parser("results", help="print the output topic as its readers see it (latest row per key)")
    _common(s)

    sub.add_parser("jars", help="fetch Spark's Kafka connector jars (cached) and print where they are")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "generate":
        from pipeline.events import GeneratorSettings
        from pipeline.generator import generate
        from pipeline.topics import ensure_topics, records_in

        topics = _topics(args)
        ensure_topics(args.bootstrap, topics)
        settings = GeneratorSettings(seed=args.seed, step_ms=args.step_ms, malformed_every=args.malformed_every)
        first = args.first if args.first is not None else records_in(args.bootstrap, topics.raw)
        print(generate(args.bootstrap, topics.raw, settings, first, args.count, args.rate).line())
        return 0
    if args.command == "run":
        from pipeline import stream

        stop = threading.Event()
        stream.install_signal_handlers(stop)
        settings = stream.StreamSettings(
            bootstrap=args.bootstrap, checkpoint=args.checkpoint.resolve(), topics=_topics(args),
            windowing=_windowing(args), trigger=args.trigger, max_offsets_per_trigger=args.max_offsets_per_trigger,
            master=args.master, stop_when_idle=args.stop_when_idle, commit_group=args.commit_group,
            catch_up=args.catch_up, catch_up_chunk=args.catch_up_chunk,
        )
        from pipeline.gaps import CatchUpStateError

        try:
            stream.run(settings, stream.printer(args.json), stop)
        except CatchUpStateError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    if args.command == "batch":
        from pipeline.batch import BatchSettings, recompute

        res = recompute(BatchSettings(args.bootstrap, _topics(args), _windowing(args), args.master))
        print(f"raw records {res.raw_records}, dead letters {res.dead_letters}, closed windows"
              f" {len(res.aggregates)} (watermark {res.watermark})", file=sys.stderr)
        if args.out:
            args.out.write_text(json.dumps(res.aggregates, indent=1, sort_keys=True))
        else:
            for key in sorted(res.aggregates):
                print(res.aggregates[key])
        return 0
    if args.command == "results":
        from pipeline.results import latest_per_key, read_topic

        rows = latest_per_key(read_topic(args.bootstrap, args.output_topic))
        for key in sorted(rows):
            print(rows[key])
        print(f"{len(rows)} rows", file=sys.stderr)
        return 0
    if args.command == "jars":
        from pipeline.spark_env import ensure_connector_jars

        for jar in ensure_connector_jars():
            print(jar)
        return 0
    return 2
