"""Latency samples of the fleet commands' client processes (bench/clients/omb_client.py writes them
as raw doubles, one file per client and kind) and their percentiles, read the same way by every
command that runs those clients (omb, drain)."""

from __future__ import annotations

from array import array
from pathlib import Path


def read_samples(path: Path) -> array:
    """The doubles a client wrote to `path` (none if it wrote nothing)."""
    a = array("d")
    if path.exists():
        a.frombytes(path.read_bytes())
    return a


def pct(xs: list[float], q: float) -> float | None:
    """The q-quantile of sorted seconds, in ms (nearest rank)."""
    if not xs:
        return None
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def percentiles(xs: list[float], prefix: str) -> dict[str, float | None]:
    xs = sorted(xs)
    return {f"{prefix}_p50_ms": pct(xs, 0.5), f"{prefix}_p99_ms": pct(xs, 0.99),
            f"{prefix}_p999_ms": pct(xs, 0.999), f"{prefix}_max_ms": xs[-1] * 1000 if xs else None}
