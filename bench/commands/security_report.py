"""The report of `python -m bench security`: throughput per target, transport and direction, each
target's SASL_SSL / PLAINTEXT ratio (the price of TLS, SCRAM and the authorizer) and the
Flotilla / Apache ratio per transport. A phase that failed shows its error instead of a number, and
no ratio is computed from it."""

from __future__ import annotations

from typing import Any

TARGETS = ("flotilla", "apache")
TRANSPORTS = ("plaintext", "sasl_ssl")
PHASES = ("produce", "consume")
MIB = 1024 * 1024


def rates(phase: dict[str, Any] | None) -> dict[str, float] | None:
    """records/s and MiB/s of one measured phase; None if it failed or moved nothing."""
    if not phase or phase.get("error") or not phase.get("seconds") or not phase.get("records"):
        return None
    s = phase["seconds"]
    return {"records_per_sec": phase["records"] / s, "mb_per_sec": phase["bytes"] / MIB / s}


def ratio(num: float | None, den: float | None) -> float | None:
    return num / den if num is not None and den else None


def _rps(results: dict, target: str, transport: str, phase: str) -> float | None:
    r = rates(results.get(target, {}).get(transport, {}).get(phase))
    return r["records_per_sec"] if r else None


def ratios(results: dict) -> dict[str, Any]:
    """{"sasl_over_plain": {target: {phase: x}}, "flotilla_over_apache": {transport: {phase: x}}},
    from records/s (equal record sizes make the MiB/s ratio the same)."""
    return {
        "sasl_over_plain": {t: {p: ratio(_rps(results, t, "sasl_ssl", p), _rps(results, t, "plaintext", p))
                                for p in PHASES} for t in TARGETS},
        "flotilla_over_apache": {tr: {p: ratio(_rps(results, "flotilla", tr, p), _rps(results, "apache", tr, p))
                                      for p in PHASES} for tr in TRANSPORTS},
    }


def _num(x: float | None, fmt: str) -> str:
    return "—" if x is None else format(x, fmt)


def render(doc: dict[str, Any]) -> str:
    """The markdown of bench/results/security.md from the JSON document."""
    results, settings = doc["results"], doc["settings"]
    r = ratios(results)
    out = ["# Throughput over SASL_SSL with ACLs vs PLAINTEXT, Flotilla and Apache Kafka 4.1", "",
           f"Run {doc['when']} by `python -m bench security`. {doc.get('note', '')}".rstrip(), "",
           f"One broker each, configured alike: {settings['brokers']}. Client: {settings['client']}.", "",
           "| target | transport | direction | records/s | MiB/s | records | seconds |",
           "|---|---|---|---:|---:|---:|---:|"]
    errors = []
    for t in TARGETS:
        if results.get(t, {}).get("error"):
            errors.append(f"- {t}: {results[t]['error']}")
        for tr in TRANSPORTS:
            for p in PHASES:
                ph = results.get(t, {}).get(tr, {}).get(p)
                rt = rates(ph)
                if ph and ph.get("error"):
                    errors.append(f"- {t} {tr} {p}: {ph['error']}")
                out.append(f"| {t} | {tr} | {p} | {_num(rt and rt['records_per_sec'], ',.0f')} | "
                           f"{_num(rt and rt['mb_per_sec'], '.1f')} | {(ph or {}).get('records', '—')} | "
                           f"{_num((ph or {}).get('seconds'), '.1f')} |")
    out += ["", "## Ratios (records/s)", "", "| ratio | produce | consume |", "|---|---:|---:|"]
    for t in TARGETS:
        x = r["sasl_over_plain"][t]
        out.append(f"| {t}: SASL_SSL+ACLs / PLAINTEXT | {_num(x['produce'], '.2f')} | {_num(x['consume'], '.2f')} |")
    for tr in TRANSPORTS:
        x = r["flotilla_over_apache"][tr]
        out.append(f"| Flotilla / Apache over {tr.upper()} | {_num(x['produce'], '.2f')} | {_num(x['consume'], '.2f')} |")
    if errors:
        out += ["", "## Failures", "", *errors]
    machine = doc.get("machine", {})
    out += ["", "## Machine", "", f"{machine.get('cores', '?')} cores ({machine.get('cpu_model', '?')}); "
            f"{doc.get('machine_note', '')}".rstrip(), ""]
    return "\n".join(out)
