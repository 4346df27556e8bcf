"""Writes a run's results: JSON (everything), a markdown table, and a PNG chart of the ratios."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from bench.harness.targets import LABELS


def _fmt(v: float | None) -> str:
    if v is None:
        return "–"
    if v == 0:
        return "0"
    a = abs(v)
    if a >= 1000:
        return f"{v:,.0f}"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def _verdict(row: dict[str, Any]) -> str:
    rel = row.get("flotilla_relative_performance")
    if rel is None:
        return ""
    if 0.95 <= rel <= 1.05:
        return "on par"
    if rel > 1:
        return f"Flotilla {rel:.2f}× better"
    return f"Kafka {1 / rel:.2f}× better"


def _spread(xs: list[float]) -> str:
    if len(xs) < 2:
        return ""
    return f" ({_fmt(min(xs))}–{_fmt(max(xs))})"


def markdown(data: dict[str, Any]) -> str:
    m = data["machine"]
    targets = data["targets"]
    loads = data["load"]
    la = [x["loadavg"][0] for x in loads]
    others = [x["other_processes_cores"] for x in loads if x.get("other_processes_cores") is not None]
    lines = [
        f"# Flotilla vs Apache Kafka{' (smoke run, not a measurement)' if data['smoke'] else ''}",
        "",
        f"Run {data['started']} UTC, {data['duration_seconds']:.0f} s; {data['settings']['repeat']} round(s), "
        "targets alternating (round 1 Kafka first, then Flotilla first, ...), fresh data per broker start; "
        "values are medians over rounds (min–max in brackets).",
        "",
        f"- Machine: {m['cpu_model']}, {m['cores']} cores, {m['memory_gb']} GB RAM, Linux {m['kernel']}",
        f"- Software: Python {m['python']}, {m['java']}, Apache Kafka {m['apache_kafka']} (stock JVM options of "
        f"kafka-server-start), kafka-tools {m['kafka_tools']}, "
        + ", ".join(f"{k} {v}" for k, v in m.get("clients", {}).items())
        + f", Flotilla {m.get('flotilla_commit') or '?'}",
        "- Brokers: one node on loopback, same settings on both sides: "
        + ", ".join(f"`{k}={v}`" for k, v in data["settings"]["broker_settings"][str(data['settings']['partitions'][0])].items()
                    if k != "num.partitions")
        + f", `num.partitions` = {' and '.join(str(p) for p in data['settings']['partitions'])} (topics created with that many partitions).",
        f"- Load average (1 min) before the run: {la[0]:.2f}; after each round: {', '.join(f'{x:.2f}' for x in la[1:])}"
        " (the run itself keeps about two processes busy: broker and client)."
        + (f" CPU used by other processes on the machine, per round: {', '.join(f'{x:.2f}' for x in others)} cores"
           f" of {m['cores']}." if others else "")
        + (" **The machine was shared and busy during this run; absolute numbers are noisy, the ratios less so.**"
           if la[0] >= 1.5 or (others and max(others) >= 0.5) else ""),
        "",
    ]
    warm = data.get("warmups") or []
    for t in targets:
        ws = [w for w in warm if w["target"] == t and w.get("broker_cpu_per_round")]
        if not ws:
            continue
        first = sorted(w["broker_cpu_per_round"][0] for w in ws)[len(ws) // 2]
        last = sorted(w["broker_cpu_per_round"][-1] for w in ws)[len(ws) // 2]
        rounds = sorted(w["rounds"] for w in ws)
        capped = sum(1 for w in ws if len(w["broker_cpu_per_round"]) > 1
                     and w["broker_cpu_per_round"][-1] < 0.9 * min(w["broker_cpu_per_round"][:-1]))
        lines.append(
            f"- Warm-up, {LABELS[t]}: {rounds[0]}–{rounds[-1]} rounds per broker session; broker CPU per warm-up "
            f"round (median over sessions) {first:.2f} s in the first round, {last:.2f} s in the last"
            + (f"; in {capped} of {len(ws)} sessions it was still falling when the warm-up stopped at its cap,"
                 " so those cases measured a broker that was still getting faster"
               if capped else "") + "."
        )
    for p, r in data["settings"].get("latency_rates", {}).items():
        lines.append(f"- Latency run, {p} partition(s): {r['records_per_sec']:,} records/s offered ({r['basis']}).")
    lines += [
        "",
        "Ratio = Flotilla median / Kafka median (in brackets: the range of the per-round ratios, "
        "Flotilla and Kafka of the same round); the last column reads it with the metric's direction "
        "(throughput: higher is better; latency, memory, start time: lower is better).",
        "",
    ]
    head = ["case", "metric", *[LABELS[t] for t in targets]]
    if len(targets) > 1:
        head += ["Flotilla/Kafka", "better", "verdict"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for row in data["results"]:
        if not row["primary"]:
            continue
        cells = [row["title"], f"{row['label']} ({row['unit']})"]
        for t in targets:
            v = row["median"].get(t)
            cells.append(_fmt(v) + _spread(row["samples"].get(t, [])) if v is not None else "failed / not run")
        if len(targets) > 1:
            ratio = row["ratio_flotilla_over_kafka"]
            pr = row.get("ratio_per_round") or []
            rtxt = f"{ratio:.2f}" if ratio is not None else "–"
            if len(pr) > 1:
                rtxt += f" ({min(pr):.2f}–{max(pr):.2f})"
            cells += [rtxt, row["better"], _verdict(row)]
        lines.append("| " + " | ".join(cells) + " |")

    cpu_rows = [r for r in data["results"] if r["metric"] == "broker_cpu_s_per_gb"]
    if cpu_rows:
        lines += [
            "",
            "Broker CPU time per GB moved (user+system CPU of the broker process during the case, from "
            "/proc; less sensitive to other load on the machine than wall-clock throughput; lower is better):",
            "",
            "| case | " + " | ".join(LABELS[t] for t in targets) + (" | Flotilla/Kafka |" if len(targets) > 1 else " |"),
            "|" + "---|" * (1 + len(targets) + (1 if len(targets) > 1 else 0)),
        ]
        for row in cpu_rows:
            cells = [row["title"]] + [_fmt(row["median"].get(t)) for t in targets]
            if len(targets) > 1:
                r = row["ratio_flotilla_over_kafka"]
                cells.append(f"{r:.2f}" if r is not None else "–")
            lines.append("| " + " | ".join(cells) + " |")

    if data["failures"]:
        lines += ["", "## Failures", ""]
        for f in data["failures"]:
            first = f["error"].splitlines()[0] if f["error"] else ""
            lines.append(f"- `{f['case']}` on {LABELS.get(f['target'], f['target'])}, round {f['round']}: {first[:300]}")
        lines.append("")
        lines.append("Full errors and broker log tails are in the JSON file (`failures`).")
    if data["skipped"] or data["notes"]:
        lines += ["", "## Not run", ""]
        for n in data["notes"]:
            lines.append(f"- {n}")
        for s in data["skipped"]:
            lines.append(f"- `{s['case']}`: {s['reason']}")
    lines.append("")
    return "\n".join(lines)


def chart(data: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in data["results"] if r["primary"]]
    have_ratio = [r for r in rows if r["flotilla_relative_performance"] is not None]
    if have_ratio:
        rows = have_ratio
        values = [r["flotilla_relative_performance"] for r in rows]
        xlabel = ("Flotilla relative to Apache Kafka (log scale; >1: Flotilla better, <1: Kafka better;"
                  " whiskers: range of per-round ratios)")
    else:
        rows = [r for r in rows if r["median"].get("flotilla")]
        values = [r["median"]["flotilla"] for r in rows]
        xlabel = "Flotilla medians (no Apache Kafka in this run; each bar in its own unit)"
    labels = [f"{r['title'].replace(' partitions', 'p').replace(' partition', 'p')}: {r['label']}"
              .replace("Java perf tool", "Java").replace("start-to-ready: ", "") for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(rows) + 1.4))
    y = list(range(len(rows)))[::-1]
    colors = ["#2a9d8f" if (v >= 1 or not have_ratio) else "#e76f51" for v in values]
    xerr = None
    if have_ratio:
        lo_err, hi_err = [], []
        for r, v in zip(rows, values):
            pr = [x if r["better"] == "higher" else 1 / x for x in (r.get("ratio_per_round") or []) if x > 0]
            lo_err.append(max(0.0, v - min(pr)) if len(pr) > 1 else 0.0)
            hi_err.append(max(0.0, max(pr) - v) if len(pr) > 1 else 0.0)
        if any(lo_err) or any(hi_err):
            xerr = [lo_err, hi_err]
    ax.barh(y, values, color=colors, height=0.7, xerr=xerr, error_kw={"elinewidth": 0.8, "capsize": 2})
    ax.set_yticks(y)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xscale("log")
    if have_ratio:
        ax.axvline(1.0, color="black", linewidth=0.8)
        ends = values + [1.0]
        if xerr:
            ends += [v - e for v, e in zip(values, xerr[0])] + [v + e for v, e in zip(values, xerr[1])]
        lo, hi = min(x for x in ends if x > 0), max(ends)
        ax.set_xlim(lo / 1.6, hi * 1.6)
    for i, (yi, v, r) in enumerate(zip(y, values, rows)):
        text = f"{v:.2f}×" if have_ratio else f"{_fmt(v)} {r['unit']}"
        right = v + (xerr[1][i] if xerr else 0.0)
        ax.text(right * 1.04, yi, text, va="center", fontsize=6.5)
    ax.set_xlabel(xlabel, fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    title = f"Flotilla vs Apache Kafka {data['machine']['apache_kafka']}, {data['machine']['cores']} cores, median of {data['settings']['repeat']}"
    if data["smoke"]:
        title += " (smoke run)"
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def write(data: dict[str, Any], out_dir: Path, name: str) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{name}.json", "markdown": out_dir / f"{name}.md", "png": out_dir / f"{name}.png"}
    paths["json"].write_text(json.dumps(data, indent=1, default=str) + "\n")
    paths["markdown"].write_text(markdown(data))
    try:
        chart(data, paths["png"])
    except ImportError as e:
        data.setdefault("notes", []).append(f"no chart: {e} (pip install 'flotilla[bench]')")
        paths["json"].write_text(json.dumps(data, indent=1, default=str) + "\n")
        del paths["png"]
    return paths


def write_case(result: dict[str, Any], out: Path, name: str, rows: Callable[[dict[str, Any]], Any],
               render: Callable[[dict[str, Any]], str], chart: Callable[[dict[str, Any], Path], bool]) -> list[Path]:
    """A fleet case's results (omb, drain): <name>.json with its rows, <name>.md, and <name>.png
    when the chart could be drawn (matplotlib present)."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / f"{name}.json", out / f"{name}.md"]
    result["rows"] = rows(result)
    paths[0].write_text(json.dumps(result, indent=1))
    paths[1].write_text(render(result))
    if chart(result, out / f"{name}.png"):
        paths.append(out / f"{name}.png")
    return paths


def fleet_table(targets: dict[str, Any], rows: list[dict[str, Any]], num: Callable[[Any], str]) -> list[str]:
    """Markdown lines of a fleet case (omb, drain): which target did not run or failed, then one row
    per metric with both targets and their ratio."""
    lines: list[str] = []
    for t, entry in targets.items():
        if entry.get("unavailable"):
            lines += [f"**{LABELS[t]} did not run:** {entry['unavailable']}", ""]
        for e in entry.get("errors", []):
            lines += [f"**{LABELS[t]} failed:** {e}", ""]
    lines += ["| case | metric | unit | Flotilla | Apache Kafka | Flotilla / Kafka | better |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['ratio']:.2f}×" if r["ratio"] is not None else "–"
        lines.append(f"| {r['case']} | {r['label']} | {r['unit']} | {num(r['flotilla'])} | {num(r['apache'])} | "
                     f"{ratio} | {r['better']} |")
    return lines


def cores_note(label: str, entry: dict[str, Any]) -> list[str]:
    """The note on other processes' CPU during one target's run of a fleet case, if measured."""
    cores = (entry.get("machine") or {}).get("other_cores")
    return [] if cores is None else [f"{label}: other processes used {cores:.2f} of the cores during its run"]


def with_notes(lines: list[str], notes: list[str]) -> str:
    """A fleet case's markdown: its lines, then its notes as a list."""
    if notes:
        lines = [*lines, "", *[f"- {n}." for n in notes]]
    return "\n".join(lines) + "\n"


def versions_line(machine: dict[str, Any]) -> str:
    """What ran: Flotilla's commit, Kafka's version, the clients, Python and Java."""
    clients = ", ".join(f"{k} {v}" for k, v in (machine.get("clients") or {}).items())
    java = str(machine.get("java", "")).split(" Runtime")[0]
    return (f"Versions: Flotilla {machine.get('flotilla_commit', '?')}, Apache Kafka {machine.get('apache_kafka', '?')}, "
            f"{clients}; Python {machine.get('python', '?')}, {java}; kernel {machine.get('kernel', '?')}, "
            f"{machine.get('memory_gb', '?')} GB memory.")
