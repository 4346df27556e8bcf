"""Progress lines from Structured Streaming's per-micro-batch progress reports.

Spark reports, after every micro-batch of a query, the input rows, the Kafka offsets the batch
started and ended at and the latest offsets on the broker, the watermark, and rows the state
operator dropped as later than the watermark. One line per batch says that in words; `--json`
prints the same facts as one JSON object per line for scripts (the e2e test reads them).
"""

from __future__ import annotations

import json
from typing import Any


def _offsets(value: Any) -> dict[str, dict[str, int]]:
    if isinstance(value, str):
        value = json.loads(value) if value else {}
    return value or {}


def lag(source: dict[str, Any]) -> int | None:
    """Records on the broker that the query has not read yet: sum over partitions of latest - end."""
    latest = _offsets(source.get("latestOffset"))
    end = _offsets(source.get("endOffset"))
    if not latest:
        return None
    total = 0
    for topic, parts in latest.items():
        for partition, offset in parts.items():
            total += max(0, int(offset) - int(end.get(topic, {}).get(partition, 0)))
    return total


def summarize(progress: dict[str, Any]) -> dict[str, Any]:
    """The facts of one progress report that the pipeline prints."""
    sources = progress.get("sources") or [{}]
    state = progress.get("stateOperators") or []
    sink = progress.get("sink") or {}
    return {
        "query": progress.get("name"),
        "batch": progress.get("batchId"),
        "input_rows": progress.get("numInputRows", 0),
        "rows_per_second": round(progress.get("processedRowsPerSecond") or 0.0, 1),
        "lag": sum(x for x in (lag(s) for s in sources) if x is not None),
        "end_offsets": _offsets(sources[0].get("endOffset")),
        "watermark": (progress.get("eventTime") or {}).get("watermark"),
        "state_rows": sum(op.get("numRowsTotal", 0) for op in state),
        "late_rows_dropped": sum(op.get("numRowsDroppedByWatermark", 0) for op in state),
        "output_rows": sink.get("numOutputRows", -1),
        "duration_ms": (progress.get("durationMs") or {}).get("triggerExecution"),
        "timestamp": progress.get("timestamp"),
    }


def epoch_seconds(timestamp: str) -> float:
    """Spark's progress timestamp (`2026-01-01T00:00:00.123Z`) as seconds since the epoch."""
    from datetime import datetime

    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def line(s: dict[str, Any]) -> str:
    parts = [f"[{s['query']}] batch {s['batch']}: {s['input_rows']} rows in"]
    if s["input_rows"]:
        parts.append(f"({s['rows_per_second']:,.0f} rows/s)")
    if s["output_rows"] is not None and s["output_rows"] >= 0:
        parts.append(f"{s['output_rows']} rows out")
    parts.append(f"lag {s['lag']}")
    if s["watermark"]:
        parts.append(f"watermark {s['watermark']}")
    if s["state_rows"]:
        parts.append(f"open windows {s['state_rows']}")
    if s["late_rows_dropped"]:
        parts.append(f"LATE ROWS DROPPED {s['late_rows_dropped']}")
    return ", ".join(parts)
