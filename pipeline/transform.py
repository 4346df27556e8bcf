"""The pipeline's logic as DataFrame functions, shared by the streaming and the batch job.

    check(raw)            parse the JSON value, validate it, enrich it from the catalogue;
                          one row per raw record, with `error` null for a valid event
    dead_letters(checked) the invalid rows as Kafka records: the original key and value untouched,
                          the reason and the source coordinates in headers
    aggregate(valid)      per event-time window and product category: events, clicks,
                          purchases, units, revenue in cents (integers: sums do not depend on order)
    output_records(aggs)  Kafka records with a deterministic key per window and category

The same functions run on a streaming DataFrame (stream.py) and on a static one (batch.py), which
is what lets the batch job check the stream.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from pipeline.catalog import PRODUCTS
from pipeline.topics import H_ERROR, H_OFFSET, H_PARTITION, H_TOPIC

CORRUPT = "_corrupt_record"
EVENT_SCHEMA = T.StructType([
    T.StructField("event_id", T.StringType()),
    T.StructField("user_id", T.StringType()),
    T.StructField("type", T.StringType()),
    T.StructField("product_id", T.StringType()),
    T.StructField("quantity", T.LongType()),
    T.StructField("ts", T.LongType()),
    T.StructField(CORRUPT, T.StringType()),
])
EVENT_TYPES = ("click", "purchase")


@dataclass(frozen=True)
class Windowing:
    """Tumbling event-time windows, closed once the watermark (max event time - delay) passes their end."""

    window: str = "10 seconds"
    watermark_delay: str = "20 seconds"


def catalog(spark: SparkSession) -> DataFrame:
    rows = [(p.product_id, p.category, p.price_cents) for p in PRODUCTS]
    return spark.createDataFrame(rows, "product_id string, category string, price_cents long")


def check(raw: DataFrame, products: DataFrame) -> DataFrame:
    """Parse, validate and enrich every raw Kafka record; `error` says what is wrong, null if nothing."""
    text = F.col("value").cast("string")
    parsed = raw.select(
        "key", "value", "topic", "partition", "offset",
        F.from_json(text, EVENT_SCHEMA, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT}).alias("e"),
        # Text that does not survive a UTF-8 round trip was not UTF-8 to begin with.
        (F.col("value").isNotNull() & (F.encode(text, "UTF-8") != F.col("value"))).alias("not_utf8"),
    )
    enriched = parsed.join(F.broadcast(products), F.col("e.product_id") == products.product_id, "left")
    e = lambda name: F.col(f"e.{name}")  # noqa: E731
    error = (
        F.when(F.col("value").isNull(), F.lit("value is null"))
        .when(F.col("not_utf8"), F.lit("value is not UTF-8"))
        .when(F.col("e").isNull() | e(CORRUPT).isNotNull(), F.lit("value is not JSON matching the event schema"))
        .when(e("event_id").isNull(), F.lit("missing field: event_id"))
        .when(e("user_id").isNull(), F.lit("missing field: user_id"))
        .when(e("type").isNull(), F.lit("missing field: type"))
        .when(e("product_id").isNull(), F.lit("missing field: product_id"))
        .when(e("ts").isNull(), F.lit("missing field: ts"))
        .when(~e("type").isin(*EVENT_TYPES), F.concat(F.lit("unknown event type: "), e("type")))
        .when((e("type") == "purchase") & (e("quantity").isNull() | (e("quantity") <= 0)),
              F.lit("purchase without a positive quantity"))
        .when(F.col("category").isNull(), F.concat(F.lit("unknown product: "), e("product_id")))
    )
    purchase = e("type") == "purchase"
    return enriched.select(
        "key", "value", "topic", "partition", "offset",
        error.alias("error"),
        e("event_id").alias("event_id"), e("user_id").alias("user_id"), e("type").alias("type"),
        e("product_id").alias("product_id"), "category",
        F.when(purchase, e("quantity")).otherwise(F.lit(0)).alias("units"),
        F.when(purchase, e("quantity") * F.col("price_cents")).otherwise(F.lit(0)).alias("revenue_cents"),
        F.timestamp_millis(e("ts")).alias("event_time"),
    )


def valid(checked: DataFrame) -> DataFrame:
    return checked.where(F.col("error").isNull())


def invalid(checked: DataFrame) -> DataFrame:
    return checked.where(F.col("error").isNotNull())


def _header(name: str, value: Column) -> Column:
    return F.struct(F.lit(name).alias("key"), value.cast("string").cast("binary").alias("value"))


def dead_letters(checked: DataFrame) -> DataFrame:
    """Invalid records as Kafka records (key, value, headers), the original bytes untouched."""
    return invalid(checked).select(
        "key", "value",
        F.array(
            _header(H_ERROR, F.col("error")),
            _header(H_TOPIC, F.col("topic")),
            _header(H_PARTITION, F.col("partition")),
            _header(H_OFFSET, F.col("offset")),
        ).alias("headers"),
    )


def aggregate(valid_rows: DataFrame, windowing: Windowing, streaming: bool) -> DataFrame:
    """Totals per (window, category). On a stream the watermark bounds state and closes windows."""
    rows = valid_rows.withWatermark("event_time", windowing.watermark_delay) if streaming else valid_rows
    return rows.groupBy(F.window("event_time", windowing.window).alias("window"), "category").agg(
        F.count(F.lit(1)).alias("events"),
        F.sum(F.when(F.col("type") == "click", 1).otherwise(0)).alias("clicks"),
        F.sum(F.when(F.col("type") == "purchase", 1).otherwise(0)).alias("purchases"),
        F.sum("units").alias("units"),
        F.sum("revenue_cents").alias("revenue_cents"),
    )


def _iso(ts: Column) -> Column:
    return F.date_format(ts, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'")


def output_records(aggs: DataFrame) -> DataFrame:
    """Kafka records: key `<window start>/<category>`, value a JSON object with fixed field order.

    The same window and category always give the same key, and the same input the same value, so a
    row written twice (a re-run micro-batch after a crash) is an identical copy, and a reader that
    keeps the latest row per key sees each exactly once.
    """
    start = _iso(F.col("window.start"))
    value = F.to_json(F.struct(
        start.alias("window_start"),
        _iso(F.col("window.end")).alias("window_end"),
        F.col("category"),
        F.col("events"), F.col("clicks"), F.col("purchases"), F.col("units"), F.col("revenue_cents"),
    ))
    return aggs.select(F.concat(start, F.lit("/"), F.col("category")).alias("key"), value.alias("value"))
