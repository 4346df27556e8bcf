"""Small builders for Grafana dashboard JSON, so the shipped dashboards share one layout, one
datasource variable and one way of selecting a cluster (labels set by the chart's PodMonitors:
`namespace`, `kafka_cluster`, `pod`; the operator's own gauges name the cluster `name`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: Brokers' series of the selected namespaces and clusters.
SEL = 'namespace=~"$namespace", kafka_cluster=~"$cluster"'
#: The operator's per-KafkaCluster series (labels namespace and name).
OP_SEL = 'namespace=~"$namespace", name=~"$cluster"'
RATE = "$__rate_interval"


def rate(metric: str, by: str, extra: str = "") -> str:
    """Per-second rate of a counter, summed by `by` (a label list) over the selected brokers."""
    sel = SEL + (", " + extra if extra else "")
    return f"sum by ({by}) (rate({metric}{{{sel}}}[{RATE}]))"


def p99(by: str, extra: str = "") -> str:
    sel = SEL + (", " + extra if extra else "")
    return (f"histogram_quantile(0.99, sum by ({by}, le) "
            f"(rate(flotilla_request_latency_seconds_bucket{{{sel}}}[{RATE}])))")


@dataclass
class Target:
    expr: str
    legend: str = ""


@dataclass
class Panel:
    title: str
    targets: list[Target]
    unit: str = "short"
    kind: str = "timeseries"
    width: int = 12
    height: int = 8
    description: str = ""
    stack: bool = False
    thresholds: list[tuple[float, str]] = field(default_factory=list)


@dataclass
class Row:
    title: str
    panels: list[Panel]


def _variables(cluster_query: str) -> list[dict[str, Any]]:
    def query_var(name: str, label: str, query: str) -> dict[str, Any]:
        return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
                "query": {"query": query, "refId": f"{name}-var"}, "definition": query,
                "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
                "current": {"selected": True, "text": ["All"], "value": ["$__all"]}, "sort": 1}

    return [
        {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
         "current": {}, "hide": 0},
        query_var("namespace", "Namespace", f"label_values({cluster_query}, namespace)"),
        query_var("cluster", "KafkaCluster", f'label_values({cluster_query}{{namespace=~"$namespace"}}, kafka_cluster)'),
    ]


def _panel(p: Panel, pid: int, x: int, y: int) -> dict[str, Any]:
    targets = [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": t.expr,
                "legendFormat": t.legend or "__auto", "range": True}
               for i, t in enumerate(p.targets)]
    defaults: dict[str, Any] = {"unit": p.unit}
    if p.thresholds:
        defaults["thresholds"] = {"mode": "absolute", "steps": [{"color": c, "value": v} for v, c in p.thresholds]}
        defaults["color"] = {"mode": "thresholds"}
    if p.kind == "timeseries":
        defaults["custom"] = {"fillOpacity": 10, "showPoints": "never",
                              "stacking": {"mode": "normal" if p.stack else "none", "group": "A"}}
    out: dict[str, Any] = {"id": pid, "type": p.kind, "title": p.title, "datasource": DATASOURCE,
                           "gridPos": {"x": x, "y": y, "w": p.width, "h": p.height},
                           "targets": targets, "fieldConfig": {"defaults": defaults, "overrides": []}}
    if p.description:
        out["description"] = p.description
    if p.kind == "timeseries":
        out["options"] = {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                          "tooltip": {"mode": "multi", "sort": "desc"}}
    elif p.kind == "stat":
        out["options"] = {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                          "colorMode": "background", "graphMode": "none", "textMode": "auto"}
    return out


def dashboard(uid: str, title: str, description: str, rows: list[Row],
              cluster_query: str = "flotilla_requests_total") -> dict[str, Any]:
    """A dashboard of rows laid out left to right, 24 columns wide."""
    panels: list[dict[str, Any]] = []
    pid, y = 1, 0
    for row in rows:
        panels.append({"id": pid, "type": "row", "title": row.title, "collapsed": False,
                       "gridPos": {"x": 0, "y": y, "w": 24, "h": 1}, "panels": []})
        pid, y, x, tallest = pid + 1, y + 1, 0, 0
        for p in row.panels:
            if x + p.width > 24:
                x, y, tallest = 0, y + tallest, 0
            panels.append(_panel(p, pid, x, y))
            pid, x, tallest = pid + 1, x + p.width, max(tallest, p.height)
        y += tallest
    return {
        "uid": uid, "title": title, "description": description,
        "tags": ["flotilla", "kafka"], "editable": True, "graphTooltip": 1,
        "schemaVersion": 39, "version": 1, "refresh": "30s", "timezone": "browser",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": _variables(cluster_query)},
        "annotations": {"list": []}, "links": [], "panels": panels,
    }
