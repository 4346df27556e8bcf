"""The report of `python -m bench drain` (bench/commands/drain.py): a table of each case's numbers per
target with the Flotilla / Kafka ratio where both measured, a side that could not run with the
reason, and a chart of Flotilla's relative performance; bench/results/<name>.{json,md,png}."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.harness.report import cores_note, fleet_table, versions_line, with_notes, write_case
from bench.harness.targets import LABELS

CASES = ("unthrottled", "throttled")
METRICS = [  # (key, label, unit, higher is better; None: neither)
    ("seconds", "drain time (tool start to settled)", "s", False),
    ("mib_per_sec", "moved per second (drained broker's bytes / drain time)", "MiB/s", True),
    ("broker_cpu_s_per_gib", "broker CPU per GiB moved (3 brokers)", "s", False),
    ("peak_5s_mib_per_sec", "fastest 5 s of copies growing on one receiving broker", "MiB/s", None),
    ("floor_s", "least time the throttle allows", "s", None),
    ("seconds_over_floor", "drain time / that least time (< 1: the throttle did not hold)", "×", None),
    ("before_p50_ms", "produce p50 before the move", "ms", False),
    ("before_p99_ms", "produce p99 before the move", "ms", False),
    ("during_p50_ms", "produce p50 during the move", "ms", False),
    ("during_p99_ms", "produce p99 during the move", "ms", False),
    ("during_p999_ms", "produce p99.9 during the move", "ms", False),
    ("during_max_ms", "produce max during the move", "ms", False),
    ("during_over_before_p99", "p99 during / p99 before", "×", False),
    ("leader_change_count", "polls (0.2 s) that saw a leader change during the move", "", None),
    ("during_away_p99_ms", "produce p99 during, away from leader changes (1 s before to 3 s after)", "ms", False),
    ("during_near_p99_ms", "produce p99 during, near leader changes", "ms", False),
]
# Keys only the throttled case has; they are left out of the unthrottled rows.
THROTTLED_ONLY = {"floor_s", "seconds_over_floor"}


def value(entry: dict[str, Any] | None, case: str, key: str) -> float | None:
    v = ((entry or {}).get("cases") or {}).get(case, {}).get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def rows(result: dict[str, Any]) -> list[dict[str, Any]]:
    f, k = result["targets"].get("flotilla"), result["targets"].get("apache")
    out = []
    for case in CASES:
        for key, label, unit, higher in METRICS:
            if case == "unthrottled" and key in THROTTLED_ONLY:
                continue
            fv, kv = value(f, case, key), value(k, case, key)
            out.append({"case": case, "metric": key, "label": label, "unit": unit,
                        "better": {True: "higher", False: "lower", None: "–"}[higher], "flotilla": fv, "apache": kv,
                        "ratio": fv / kv if fv is not None and kv else None})
    return out


def _num(x: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:,.0f}" if abs(x) >= 100 or float(x).is_integer() else f"{x:,.2f}"


def _mib(n: Any) -> str:
    return f"{n / 1024 ** 2:,.0f} MiB" if isinstance(n, (int, float)) else "?"


def render(result: dict[str, Any]) -> str:
    s = result["settings"]
    lines = [
        "# Draining one of three brokers: Flotilla / Apache Kafka", "",
        f"Run {result['when']}, `{result.get('command', 'python -m bench drain')}`, on "
        f"{result['machine'].get('cores')} cores ({result['machine'].get('cpu_model')}), three brokers per target and "
        "every client on the same machine, one target after the other, one round each.", "",
        versions_line(result["machine"]), "",
        *([f"**Note:** {result['note']}", ""] if result.get("note") else []),
        f"A topic of {s['partitions']} partitions, replication factor {s['replication_factor']}, with broker 3 in every "
        f"partition (leading half of them), filled with {s['size_mib']:,} MiB by Kafka's ProducerPerformance (acks=all, "
        f"{s['fill_record_size']}-byte records). A steady librdkafka producer (idempotent, acks=all, "
        f"{s['size']}-byte records, linger.ms {s['linger_ms']}) writes {s['rate']:,.0f} records/s into the same topic "
        "throughout. Each drain moves broker 3's replicas onto brokers 1 and 2 (the same plan on both targets) with "
        "Kafka 4.1's `kafka-reassign-partitions.sh --execute`, timed from starting the tool until "
        "ListPartitionReassignments lists nothing and Metadata shows the planned replicas, all in the ISR. First "
        "without a throttle, then the move back (untimed, left out), then with `--throttle "
        f"{s['throttle']}` ({s['throttle'] / 1024 ** 2:,.0f} MiB/s, per broker and direction: "
        "`leader/follower.replication.throttled.rate` on the brokers of the move, the topic's "
        "`*.replication.throttled.replicas`, as the tool sets them; `--verify` clears them after). 'Before' is the "
        f"producer's records sent in the {s['before']:g} s before a drain started, 'during' those sent from the tool's return (the move under way) until settled (the tool's own JVM start, "
        "which competes with the producer for the cores, is left out; the window with it is in the JSON, `during_incl_tool_*`). "
        "The least time the throttle allows is the bytes the busiest broker must send (leader side) or fetch "
        "(follower side) divided by the rate; 'fastest 5 s' is the quickest growth of the topic's segment files on "
        "brokers 1 or 2 over any 5 s of the move (sampled every 0.5 s; their existing replicas grow with the steady "
        "producer too), to set against the throttle per broker.", "",
    ]
    lines += fleet_table(result["targets"], rows(result), _num)
    notes = []
    for t, entry in result["targets"].items():
        cases = entry.get("cases") or {}
        for name in CASES:
            c = cases.get(name)
            if not c:
                continue
            note = (f"{LABELS[t]}, {name}: broker {entry.get('victim')} held {_mib(c.get('victim_bytes'))} of the topic's "
                    f"segments, {_mib(c.get('victim_bytes_after'))} once settled; the tool itself took "
                    f"{_num(c.get('tool_seconds'))} s of the drain time; {c.get('before_records', 0):,} records "
                    f"before, {c.get('during_records', 0):,} during")
            if name == "throttled":
                note += "; throttles cleared by --verify" if c.get("throttle_cleared") else "; --verify did not say it cleared the throttles"
            notes.append(note)
        fill, back, prod = entry.get("fill"), entry.get("move_back"), entry.get("producer")
        if fill:
            notes.append(f"{LABELS[t]}: the fill ran at {_num(fill.get('mb_per_sec'))} MB/s ({_num(fill.get('seconds'))} s); "
                         f"the move back took {_num((back or {}).get('seconds'))} s")
        if prod:
            notes.append(f"{LABELS[t]}: the steady producer sent {prod.get('sent') or 0:,} records, "
                         f"{prod.get('acked') or 0:,} acknowledged, {prod.get('errors') or 0} failed deliveries"
                         + (f" (first: {prod['first_errors']})" if prod.get("first_errors") else ""))
        notes += cores_note(LABELS[t], entry)
    return with_notes(lines, notes)


def chart(result: dict[str, Any], path: Path) -> bool:
    """Per target, produce p50 and p99 before and during each drain, and the drain times."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    targets = [t for t in ("flotilla", "apache") if (result["targets"].get(t) or {}).get("cases")]
    if not targets:
        return False
    fig, (lat_ax, time_ax) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 1]})
    groups = [(case, phase, q) for case in CASES for phase in ("before", "during") for q in ("p50", "p99")]
    width = 0.8 / len(targets)
    for i, t in enumerate(targets):
        entry = result["targets"][t]
        vals = [value(entry, case, f"{phase}_{q}_ms") or 0 for case, phase, q in groups]
        lat_ax.bar([g + i * width for g in range(len(groups))], vals, width, label=LABELS[t])
        secs = [value(entry, case, "seconds") or 0 for case in CASES]
        time_ax.bar([g + i * width for g in range(len(CASES))], secs, width, label=LABELS[t])
    lat_ax.set_xticks([g + width * (len(targets) - 1) / 2 for g in range(len(groups))],
                      [f"{c}\n{ph} {q}" for c, ph, q in groups], fontsize=7)
    lat_ax.set_ylabel("produce latency (ms)")
    lat_ax.set_yscale("log")
    lat_ax.legend(fontsize=8)
    lat_ax.set_title("acks=all produce latency, before and during the drain", fontsize=9)
    time_ax.set_xticks([g + width * (len(targets) - 1) / 2 for g in range(len(CASES))], list(CASES), fontsize=8)
    time_ax.set_ylabel("drain time (s)")
    time_ax.set_title(f"drain of {result['settings']['size_mib']:,} MiB", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(result: dict[str, Any], out: Path, name: str) -> list[Path]:
    return write_case(result, out, name, rows, render, chart)
