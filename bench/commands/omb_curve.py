"""The latency-throughput curve OMB draws (`python -m bench omb --rates`): the OMB-shaped load offered
at 10%, 25%, 50% and 75% of Kafka's `omb-max` peak of the same run, in turn, to both brokers, with
produce and end-to-end p50/p99/p99.9 at each. Users size clusters by the latency at their rate,
which one fixed rate (the `omb-rate` case) hides. The cases are `curve-10` ... `curve-75`; this
module names them, renders their table and draws the plot (latency against offered rate)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

FRACTIONS = (0.10, 0.25, 0.50, 0.75)
PERCENTILES = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"))


def case_name(fraction: float) -> str:
    return f"curve-{round(fraction * 100)}"


def cases(result: dict[str, Any]) -> list[tuple[float, str]]:
    """(fraction, case) of the curve points any target ran, lowest first."""
    names = {c for e in result["targets"].values() for c in e.get("cases", {}) if c.startswith("curve-")}
    return sorted((int(n.split("-")[1]) / 100, n) for n in names)


def _ms(entry: dict[str, Any], case: str, key: str) -> float | None:
    v = entry.get("cases", {}).get(case, {}).get(key)
    return float(v) if isinstance(v, (int, float)) else None


def table(result: dict[str, Any], num) -> list[str]:
    """Markdown: one row per offered rate, Flotilla / Kafka / ratio per percentile."""
    points = cases(result)
    if not points:
        return []
    f, k = result["targets"].get("flotilla", {}), result["targets"].get("apache", {})
    head = ["offered (of Kafka's peak)", "records/s"]
    for kind in ("produce", "end-to-end"):
        for _, label in PERCENTILES:
            head.append(f"{kind} {label} ms Flotilla / Kafka")
    lines = ["## Latency at fixed rates (the curve)", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for fraction, case in points:
        offered = next((e["cases"][case].get("offered_rate") for e in (k, f)
                        if e and case in e.get("cases", {})), None)
        row = [f"{fraction:.0%}", num(offered)]
        for prefix in ("produce", "e2e"):
            for key, _ in PERCENTILES:
                fv, kv = _ms(f, case, f"{prefix}_{key}_ms"), _ms(k, case, f"{prefix}_{key}_ms")
                ratio = f" ({fv / kv:.2f}×)" if fv is not None and kv else ""
                row.append(f"{num(fv)} / {num(kv)}{ratio}")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    return lines


def chart(result: dict[str, Any], path: Path) -> bool:
    """Latency (log) against offered rate, p50 and p99 of produce and end-to-end, one colour per broker."""
    points = cases(result)
    if not points:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, prefix, title in ((axes[0], "produce", "produce (send to acknowledgement)"),
                              (axes[1], "e2e", "end to end (send to consume)")):
        for target, colour in (("flotilla", "tab:blue"), ("apache", "tab:orange")):
            entry = result["targets"].get(target)
            if not entry:
                continue
            for key, style in (("p50", "-o"), ("p99", "--s")):
                xs, ys = [], []
                for _, case in points:
                    c = entry.get("cases", {}).get(case, {})
                    y = c.get(f"{prefix}_{key}_ms")
                    if c.get("offered_rate") and y:
                        xs.append(c["offered_rate"])
                        ys.append(y)
                if xs:
                    ax.plot(xs, ys, style, color=colour, label=f"{'Flotilla' if target == 'flotilla' else 'Kafka'} {key}")
        ax.set_yscale("log")
        ax.set_xlabel("offered rate (records/s)")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("latency (ms)")
    axes[1].legend(fontsize=8)
    fig.suptitle("Latency against offered rate, three brokers, OMB-shaped load")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
