"""Driving `python -m pipeline run` as a child process in e2e tests, and what its output must be.

The streaming driver runs in its own process group (Python and Spark's JVM), so a test can kill it
with SIGKILL as a crash would. `expected_aggregates` computes in plain Python the closed windows
the stream must have written for the generated events.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from flotilla.testenv.brokers.broker_process import REPO_ROOT


def read_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON lines a `--json` run printed (Spark's own log lines skipped)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def spawn(cmd: list[str], log: Path) -> subprocess.Popen:
    with open(log, "w") as f:
        return subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the driver's whole process group (Python and Spark's JVM) and wait until it is gone."""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError("the streaming driver's processes outlived SIGKILL")


def expected_aggregates(events: list, window_ms: int, watermark_ms: int) -> dict[str, dict[str, Any]]:
    """The closed windows' totals of `events` (pipeline.events.make_events), in plain Python: the
    windows whose end is at or before the final watermark, max(event time) - delay."""
    from pipeline.catalog import BY_ID

    valid = [e for e in events if e.malformed is None]
    watermark = max(e.ts for e in valid) - watermark_ms
    out: dict[str, dict[str, Any]] = {}
    for e in valid:
        start = e.ts - e.ts % window_ms
        if start + window_ms > watermark:
            continue
        product = BY_ID[e.product_id]
        iso = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(start / 1000)) + ".000Z"
        row = out.setdefault(f"{iso}/{product.category}", {
            "window_start": iso,
            "window_end": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime((start + window_ms) / 1000)) + ".000Z",
            "category": product.category, "events": 0, "clicks": 0, "purchases": 0, "units": 0, "revenue_cents": 0,
        })
        row["events"] += 1
        if e.type == "click":
            row["clicks"] += 1
        else:
            row["purchases"] += 1
            row["units"] += e.quantity
            row["revenue_cents"] += e.quantity * product.price_cents
    return out
