"""The batch job: the same aggregates recomputed from everything in the raw topic, for checking.

It runs the streaming job's own transform (check, aggregate, output_records) over a static read of
the raw topic (earliest to latest offsets), and keeps the windows the stream would have closed by
now: those whose end is at or before the final watermark, max(event time) - delay, which is the
rule Spark's append mode applies (a window is emitted once the watermark reaches its end).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.topics import Topics
from pipeline.transform import Windowing


@dataclass
class BatchSettings:
    bootstrap: str
    topics: Topics = field(default_factory=Topics)
    windowing: Windowing = field(default_factory=Windowing)
    master: str = "local[2]"
    shuffle_partitions: int = 2


@dataclass
class BatchResult:
    aggregates: dict[str, str]  # output key -> value (JSON text)
    dead_letters: int
    raw_records: int
    watermark: str | None  # the final watermark the closed windows were cut at (ISO-8601), or None


def recompute(s: BatchSettings, spark=None) -> BatchResult:
    from pyspark.sql import functions as F

    from pipeline import spark_env, transform

    own = spark is None
    spark = spark or spark_env.session("flotilla-pipeline-batch", s.master, s.shuffle_partitions)
    try:
        raw = (
            spark.read.format("kafka")
            .option("kafka.bootstrap.servers", s.bootstrap)
            .option("subscribe", s.topics.raw)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
            .cache()
        )
        checked = transform.check(raw, transform.catalog(spark)).cache()
        valid = transform.valid(checked)
        max_time = valid.agg(F.max("event_time").alias("t")).first()["t"]
        aggregates: dict[str, str] = {}
        watermark = None
        if max_time is not None:
            cut = valid.select(
                (F.max("event_time") - F.expr(f"INTERVAL {s.windowing.watermark_delay}")).alias("w")
            ).first()["w"]
            watermark = cut.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
            aggs = transform.aggregate(valid, s.windowing, streaming=False)
            closed = aggs.where(F.col("window.end") <= F.lit(cut))
            for row in transform.output_records(closed).collect():
                aggregates[row["key"]] = row["value"]
        return BatchResult(
            aggregates=aggregates,
            dead_letters=transform.invalid(checked).count(),
            raw_records=raw.count(),
            watermark=watermark,
        )
    finally:
        if own:
            spark.stop()
