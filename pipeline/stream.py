"""The streaming job: two Structured Streaming queries over the raw topic, each with its checkpoint.

    dead-letters  raw -> check -> invalid rows -> dead-letter topic   (stateless)
    aggregates    raw -> check -> valid rows -> watermark -> windowed totals -> output topic
                  (append mode: a window's row is written once, when the watermark closes it)

Each query's checkpoint (`<checkpoint>/<query>/`) records, before a micro-batch runs, the offsets
it will read (offsets/N), its state after (state/), and that it finished (commits/N). After a crash
Spark re-runs the last batch without a commit from the same offsets and the same state, so it
produces the same rows again; the Kafka sink (at-least-once) may then hold a second, identical copy
of some of them. docs/pipeline.md explains why readers still see every row exactly once.

With `catch_up="parallel"` a restart with a backlog starts the dead-letter query at the log end
and a bounded job works through the gap beside it (gaps.py, catchup.py); the aggregates query
always resumes in order from its checkpoint.
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
from pipeline.catchup import line as catchup_line
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
    # "off": both queries resume from their checkpoints. "parallel": KIP-333 catch-up for the
    # dead-letter query (docs/pipeline.md, "Catch-up mode").
    catch_up: str = "off"
    catch_up_chunk: int = 10_000  # offsets per partition per Spark job of the gap


def kafka_reader(spark, s: StreamSettings, starting: dict[int, int] | None = None):
    """The raw topic as a stream; `starting` (partition -> offset) only counts for a fresh checkpoint."""
    offsets = json.dumps({s.topics.raw: {str(p): o for p, o in starting.items()}}) if starting else s.starting_offsets
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", s.bootstrap)
        .option("subscribe", s.topics.raw)
        .option("startingOffsets", offsets)
    )
    if s.max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(s.max_offsets_per_trigger))
    return reader.load()


def start_queries(spark, s: StreamSettings, dead_letters_from: dict[int, int] | None = None) -> list:
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

    checked = transform.check(kafka_reader(spark, s, dead_letters_from), products)
    queries.append(sink(transform.dead_letters(checked), "dead-letters", s.topics.dead_letter, "append"))
    checked = transform.check(kafka_reader(spark, s), products)
    aggs = transform.aggregate(transform.valid(checked), s.windowing, streaming=True)
    queries.append(sink(transform.output_records(aggs), "aggregates", s.topics.output, "append"))
    return queries


def run(s: StreamSettings, emit: Callable[[dict], None], stop: threading.Event | None = None) -> dict:
    """Run until `stop` is set (SIGTERM/SIGINT set it from the CLI) or, with `stop_when_idle`, until
    both queries have caught up. Returns totals; raises if a query fails."""
    from pipeline import gaps, spark_env
    from pipeline.catchup import GapJob, scheduler_conf
    from pipeline.consumed import ConsumedOffsets, GroupCommitter
    from pipeline.topics import end_offsets, ensure_topics

    if s.catch_up not in ("off", "parallel"):
        raise ValueError(f"catch-up mode must be 'off' or 'parallel', got {s.catch_up!r}")
    if s.catch_up_chunk <= 0:
        raise ValueError(f"the catch-up chunk must be a positive number of offsets, got {s.catch_up_chunk}")
    stop = stop or threading.Event()
    emit = _one_at_a_time(emit)  # the catch-up job reports from its own thread
    ensure_topics(s.bootstrap, s.topics)
    t_start = time.monotonic()
    plan = None
    if s.catch_up == "parallel":
        # The log end is read before Spark starts: records written during the start-up are fresh.
        plan = gaps.plan_restart(s.checkpoint, s.topics.raw, end_offsets(s.bootstrap, s.topics.raw))
    else:
        gaps.refuse_open_ranges(s.checkpoint, s.topics.raw)
    extra = scheduler_conf(gaps.ledger_path(s.checkpoint).parent) if plan is not None else None
    spark = spark_env.session("flotilla-pipeline", s.master, s.shuffle_partitions, extra)
    if threading.current_thread() is threading.main_thread():
        # PySpark's SparkContext replaced the SIGINT handler with one that raises
        # KeyboardInterrupt wherever the driver is; stop between micro-batches instead.
        install_signal_handlers(stop)
    queries = start_queries(spark, s, plan.starting_offsets if plan else None)
    started = {"event": "started", "queries": [q.name for q in queries], "checkpoint": str(s.checkpoint),
               "startup_seconds": round(time.monotonic() - t_start, 2)}
    gap_job = None
    if plan is not None:
        started["catch_up"] = {
            "query": gaps.QUERY, "starting_offsets": {str(p): o for p, o in (plan.starting_offsets or {}).items()},
            "new_gap": {str(p): list(g) for p, g in plan.new_gap.items()},
            "open_ranges": plan.ledger.describe(), "records_left": plan.ledger.records_left()}
        if not plan.ledger.done():
            gap_job = GapJob(spark, s.bootstrap, s.topics.dead_letter, plan.ledger, s.catch_up_chunk, emit)
    emit(started)
    if gap_job is not None:
        gap_job.start()
    seen = {q.name: "" for q in queries}  # timestamp of the last report printed
    idle_since: dict[str, float | None] = {q.name: None for q in queries}
    totals = {q.name: {"input_rows": 0, "batches": 0, "first_batch": None} for q in queries}
    first_data: float | None = None
    last_data: float | None = None
    consumed = ConsumedOffsets([q.name for q in queries] + ([GAPS] if gap_job else []))
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
            if gap_job is not None:
                if gap_job.error is not None:
                    raise RuntimeError(f"catch-up job of {gaps.QUERY} failed: {gap_job.error}") from gap_job.error
                # Raw records of an open range are not consumed, however far the stream has got.
                held, done = gap_job.checkpointed()
                if done:
                    consumed.forget(GAPS)
                else:
                    consumed.update(GAPS, {s.topics.raw: {str(p): o for p, o in held.items()}})
            if committer is not None:
                try:
                    if committer.commit(consumed.safe()):
                        emit({"event": "consumed", "group": committer.group, "offsets": committer.committed})
                except Exception as e:  # the group only feeds purging: retry at the next report
                    emit({"event": "warning", "message": f"committing consumed offsets to {committer.group}: {e}"})
            if s.stop_when_idle and (gap_job is None or not gap_job.is_alive()) and all(
                t is not None and time.monotonic() - t >= s.stop_when_idle for t in idle_since.values()
            ):
                break
            stop.wait(0.25)
    finally:
        if gap_job is not None:
            gap_job.stop.set()  # between chunks: the catch-up file keeps what is left
            gap_job.join()
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


def _one_at_a_time(emit: Callable[[dict], None]) -> Callable[[dict], None]:
    lock = threading.Lock()

    def locked(event: dict) -> None:
        with lock:
            emit(event)
    return locked


GAPS = "dead-letters catch-up"  # the open ranges' floor, as one more query for ConsumedOffsets


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
        elif event["event"] == "catch-up":
            print(catchup_line(event), flush=True)
        elif event["event"] == "started":
            print(f"started queries {', '.join(event['queries'])} (checkpoint {event['checkpoint']},"
                  f" Spark up in {event['startup_seconds']}s); Ctrl-C stops", flush=True)
            if "catch_up" in event:
                c = event["catch_up"]
                gap = ", ".join(f"{p}: {a}-{b}" for p, (a, b) in c["new_gap"].items()) or "none"
                print(f"[{c['query']} catch-up] new gap {gap}; {c['records_left']} records left in open ranges"
                      f" {c['open_ranges'] or '{}'}", flush=True)
        else:
            print(f"stopped: {json.dumps(event['totals'])}", flush=True)
    return emit
