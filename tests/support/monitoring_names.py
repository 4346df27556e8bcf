"""The metric names the shipped rules and dashboards use (monitoring/), and whether a /metrics
page exports each: a counter `x` is exported as `x_total`, a histogram as `x_bucket`, `x_sum`,
`x_count`, a summary as `x_sum`, `x_count`; names a recording rule defines are not scraped."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "monitoring" / "prometheus-rules.yaml"
DASHBOARDS = ROOT / "monitoring" / "dashboards"
# Every metric the shipped files use is Flotilla's own: flotilla_* (scraped) or flotilla:* (recorded).
ELECTION_ONLY = frozenset({"flotilla_operator_leader", "flotilla_operator_ready"})  # --leader-elect only
_NAME = re.compile(r"(?<![A-Za-z0-9_:])(flotilla[_:][A-Za-z0-9_:]*)")


def rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def recorded() -> set[str]:
    return {r["record"] for r in rules() if "record" in r}


def dashboard_queries() -> dict[str, list[str]]:
    """Dashboard file -> its PromQL: panel targets and template variable queries."""
    out: dict[str, list[str]] = {}
    for path in sorted(DASHBOARDS.glob("*.json")):
        d = json.loads(path.read_text())
        exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
        for var in d["templating"]["list"]:
            q = var.get("query")
            if isinstance(q, dict):
                exprs.append(q["query"])
        out[path.name] = exprs
    return out


def used() -> dict[str, set[str]]:
    """Metric name -> where it is used ("rule <name>" or a dashboard file name)."""
    where: dict[str, set[str]] = {}
    for r in rules():
        for name in _NAME.findall(r["expr"]):
            where.setdefault(name, set()).add(f"rule {r.get('alert') or r.get('record')}")
    for file, exprs in dashboard_queries().items():
        for expr in exprs:
            for name in _NAME.findall(expr):
                where.setdefault(name, set()).add(file)
    return where


_SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count"),
             "gauge": ("",), "untyped": ("",), "info": ("_info",), "stateset": ("",), "gaugehistogram": ("_bucket",)}


def exported(metrics_text: str) -> set[str]:
    """Sample names a /metrics page exports: those with samples, and those its declared families
    will have (a labelled metric nothing has touched yet shows only its HELP and TYPE)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics_text):
        names.update(s.name for s in family.samples)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
    return names
