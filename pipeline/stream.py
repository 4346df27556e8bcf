"""The streaming job: two Structured Streaming queries over the raw topic, each with its checkpoint.

    dead-letters  raw -> check -> invalid rows -> dead-letter topic   (stateless)
    aggregates    raw -> check -> valid rows -> watermark -> windowed totals -> output topic
                  (append mode: a window's row is written once, when the watermark closes it)

Each query's checkpoint (`<checkpoint>/<query>/`) records, before a micro-batch runs, the offsets
it will read (offsets/N), its state after (state/), and that it finished (commits/N). After a crash
Spark re-runs the last batch without a commit from the same offsets and the same state, so it
produces the same rows again; the Kafka sink (at-least-once) may then hold a second, identical copy
of some of them. docs/pipeline.md explains why readers still see every row exactly once.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pipeline import progress as progress_fmt
from pipeline.topics import Topics
from pipeline.transform import Windowing


@dataclass
class StreamSettings:
    bootstrap: str
    checkpoint: Path
    topics: Topics = field(default_factory=Topics)
    windowing: Windowing = field(default_factory=Windowing)
    trigger: str = "2 seconds"
    max_offsets_per_trigger: int = 0  # 0: no limit (all that is there)
    master: str = "local[2]"
    shuffle_partitions: int = 2
    starting_offsets: str = "earliest"
    # Stop once both queries have read everything and stayed idle this long (seconds; 0: run until
    # SIGTERM/SIGINT). Used by the benchmark.
    stop_when_idle: float = 0.0
    # Consumer group that gets the raw offsets both queries have finished with (consumed.py); "": none.
    commit_group: str = "flotilla-pipeline"


def kafka_reader(spark, s: StreamSettings):
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", s.bootstrap)
        .option("subscribe", s.topics.raw)
        .option("startingOffsets", s.starting_offsets)
    )
    if s.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(s.max_offsets_per_trigger))
    return reader.load()


def start_queries(spark, s: StreamSettings) -> list:
    from pipeline import transform

    products = transform.catalog(spark)
    queries = []

    def sink(df, name: str, topic: str, mode: str):
        return (
            df.writeStream.format("kafka")
            .queryName(name)
            .outputMode(mode)
            .option("kafka.bootstrap.servers", s.bootstrap)
            .option("topic", topic)
            .option("checkpointLocation", str(s.checkpoint / name))
            .trigger(processingTime=s.trigger)
            .start()
        )

    checked = transform.check(kafka_reader(spark, s), products)
    queries.append(sink(transform.dead_letters(checked), "dead-letters", s.topics.dead_letter, "append"))
    checked = transform.check(kafka_reader(spark, s), products)
    aggs = transform.aggregate(transform.valid(checked), s.windowing, streaming=True)
    queries.append(sink(transform.output_records(aggs), "aggregates", s.topics.output, "append"))
    return queries


def run(s: StreamSettings, emit: Callable[[dict], None], stop: threading.Event | None = None) -> dict:
    """Run until `stop` is set (SIGTERM/SIGINT set it from the CLI) or, with `stop_when_idle`, until
    both queries have caught up. Returns totals; raises if a query fails."""
    from pipeline import spark_env
    from pipeline.consumed import ConsumedOffsets, GroupCommitter
    from pipeline.topics import ensure_topics

    stop = stop or threading.Event()
    ensure_topics(s.bootstrap, s.topics)
    t_start = time.monotonic()
    spark = spark_env.session("flotilla-pipeline", s.master, s.shuffle_partitions)
    if threading.current_thread() is threading.main_thread():
        # PySpark's SparkContext replaced the SIGINT handler with one that raises
        # KeyboardInterrupt wherever the driver is; stop between micro-batches instead.
        install_signal_handlers(stop)
    queries = start_queries(spark, s)
    emit({"event": "started", "queries": [q.name for q in queries], "checkpoint": str(s.checkpoint),
          "startup_seconds": round(time.monotonic() - t_start, 2)})
    seen = {q.name: "" for q in queries}  # timestamp of the last report printed
    idle_since: dict[str, float | None] = {q.name: None for q in queries}
    totals = {q.name: {"input_rows": 0, "batches": 0, "first_batch": None} for q in queries}
    first_data: float | None = None
    last_data: float | None = None
    consumed = ConsumedOffsets([q.name for q in queries])
    committer = GroupCommitter(s.bootstrap, s.commit_group) if s.commit_group else None
    try:
        while not stop.is_set():
            for q in queries:
                if q.exception() is not None:
                    raise RuntimeError(f"query {q.name} failed: {q.exception()}")
                # Idle triggers report too, with the batch id of the next batch: tell reports apart
                # by their timestamps (ISO-8601, so they sort as strings).
                for p in q.recentProgress:
                    if p["timestamp"] <= seen[q.name]:
                        continue
                    seen[q.name] = p["timestamp"]
                    summary = progress_fmt.summarize(p)
                    t = totals[q.name]
                    t["input_rows"] += summary["input_rows"]
                    if summary["input_rows"] or summary["output_rows"] > 0:
                        t["batches"] += 1
                        t["first_batch"] = summary["batch"] if t["first_batch"] is None else t["first_batch"]
                    now = time.monotonic()
                    if summary["input_rows"]:
                        began = progress_fmt.epoch_seconds(summary["timestamp"])
                        first_data = began if first_data is None else min(first_data, began)
                        last_data = max(last_data or 0.0, began + (summary["duration_ms"] or 0) / 1000)
                        idle_since[q.name] = None
                    elif summary["lag"] == 0 and idle_since[q.name] is None:
                        idle_since[q.name] = now
                    emit({"event": "progress", **summary})
                    consumed.update(q.name, summary["end_offsets"])
            if committer is not None:
                try:
                    if committer.commit(consumed.safe()):
                        emit({"event": "consumed", "group": committer.group, "offsets": committer.committed})
                except Exception as e:  # the group only feeds purging: retry at the next report
                    emit({"event": "warning", "message": f"committing consumed offsets to {committer.group}: {e}"})
            if s.stop_when_idle and all(
                t is not None and time.monotonic() - t >= s.stop_when_idle for t in idle_since.values()
            ):
                break
            stop.wait(0.25)
    finally:
        if committer is not None:
            committer.close()
        for q in queries:
            try:
                q.stop()
            except Exception:  # a failed query: its exception was raised above
                pass
        spark.stop()
    result = {"event": "stopped", "totals": totals}
    if first_data is not None and last_data is not None:
        # From the start of the first micro-batch that read data to the end of the last one.
        result["busy_seconds"] = round(last_data - first_data, 3)
    emit(result)
    return result


def install_signal_handlers(stop: threading.Event) -> None:
    """SIGTERM and SIGINT stop the queries between micro-batches and close Spark cleanly."""
    def handler(signum, _frame):
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def printer(as_json: bool) -> Callable[[dict], None]:
    """Progress for people (or JSON lines): an idle query's repeated reports are printed once."""
    last_idle: dict[str, tuple] = {}

    def emit(event: dict) -> None:
        if as_json:
            print(json.dumps(event), flush=True)
        elif event["event"] == "progress":
            idle = (event["batch"], event["lag"], event["watermark"])
            if event["input_rows"] == 0 and event["output_rows"] <= 0 and last_idle.get(event["query"]) == idle:
                return
            last_idle[event["query"]] = idle
            print(progress_fmt.line(event), flush=True)
        elif event["event"] == "consumed":
            pass  # in --json output only: one line per commit would drown the progress lines
        elif event["event"] == "warning":
            print(f"warning: {event['message']}", file=sys.stderr, flush=True)
        elif event["event"] == "started":
            print(f"started queries {', '.join(event['queries'])} (checkpoint {event['checkpoint']},"
                  f" Spark up in {event['startup_seconds']}s); Ctrl-C stops", flush=True)
        else:
            print(f"stopped: {json.dumps(event['totals'])}", flush=True)
    return emit
