"""The shipped dashboards and rules (monitoring/): the chart's copies are fresh, every alert has a
runbook in docs/operations.md that its runbook_url names, the dashboards are well-formed Grafana
JSON, and every name they use looks like one of ours (tests/e2e/test_monitoring_metrics.py then
reads each from a running broker's or operator's /metrics)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from flotilla.monitoring import render
from tests.support import monitoring_names

ROOT = Path(__file__).resolve().parents[2]
OPERATIONS = ROOT / "docs" / "operations.md"
RUNBOOKS = "https://github.com/flotilla/flotilla/blob/main/docs/operations.md#"
# The alerts issue 22 asks for, by the condition they watch.
REQUIRED_ALERTS = {
    "FlotillaUnderReplicatedPartitions", "FlotillaOfflinePartitions", "FlotillaUnderMinIsrPartitions",
    "FlotillaBrokerNotReady", "FlotillaFetchSessionCacheFull", "FlotillaClientThrottled",
    "FlotillaLogDirOffline", "FlotillaDiskNearlyFull",
    # issue 24: a rebalance that cannot go on.
    "FlotillaRebalanceBlocked", "FlotillaRebalanceStalled",
    # issue 41: the operator itself, Stalled resources, and certificates the brokers serve.
    "FlotillaOperatorDown", "FlotillaOperatorNoLeader", "FlotillaOperatorNotReady", "FlotillaReconcileErrors",
    "FlotillaResourceStalled", "FlotillaCertificateExpiring",
}


def test_generated_files_and_chart_copies_are_fresh():
    assert render.stale() == [], "run `python -m flotilla.monitoring.render`"


def test_stale_copy_is_noticed(tmp_path, monkeypatch):
    monkeypatch.setattr(render, "CHART_FILES", tmp_path)
    assert tmp_path / "prometheus-rules.yaml" in render.stale()


def _runbook_section() -> str:
    text = OPERATIONS.read_text()
    start = text.index("## Alerts and runbooks")
    rest = text[start + 3:]
    end = rest.find("\n## ")
    return rest if end < 0 else rest[:end]


def test_every_alert_has_a_runbook_its_url_points_at():
    alerts = [r for r in monitoring_names.rules() if "alert" in r]
    names = {r["alert"] for r in alerts}
    assert REQUIRED_ALERTS <= names, REQUIRED_ALERTS - names
    headings = set(re.findall(r"^### (\w+)$", _runbook_section(), re.M))
    for r in alerts:
        assert r["alert"] in headings, f"no runbook paragraph for {r['alert']} in docs/operations.md"
        # GitHub's anchor of a one-word heading is the word in lower case.
        assert r["annotations"]["runbook_url"] == RUNBOOKS + r["alert"].lower()
        assert r["labels"]["severity"] in {"info", "warning", "critical"}
        assert r["annotations"]["summary"]
    assert headings == names, headings - names  # no runbook for an alert that is gone


def test_dashboards_are_grafana_dashboards_with_unique_uids_and_panel_ids():
    uids = set()
    files = sorted(monitoring_names.DASHBOARDS.glob("*.json"))
    assert len(files) == 6
    for path in files:
        d = json.loads(path.read_text())
        assert d["uid"] not in uids and len(d["uid"]) <= 40
        uids.add(d["uid"])
        ids = [p["id"] for p in d["panels"]]
        assert len(ids) == len(set(ids)), path.name
        assert [v["name"] for v in d["templating"]["list"]][:3] == ["datasource", "namespace", "cluster"]
        for p in d["panels"]:
            assert 0 <= p["gridPos"]["x"] and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, (path.name, p["title"])
            if p["type"] != "row":
                assert p["targets"] and all(t["expr"] for t in p["targets"]), (path.name, p["title"])


def test_queries_balance_their_brackets_and_use_our_metrics():
    for file, exprs in monitoring_names.dashboard_queries().items():
        for expr in exprs:
            for open_, close in ("()", "{}", "[]"):
                assert expr.count(open_) == expr.count(close), (file, expr)
            assert monitoring_names._NAME.search(expr), (file, expr)
    used = monitoring_names.used()
    # What each dashboard is for is in it.
    for needed in ("flotilla_request_latency_seconds_bucket", "flotilla_isr_shrinks_total",
                   "flotilla_incremental_fetch_session_evictions_total", "flotilla_quota_throttle_time_seconds_total",
                   "flotilla_transactions", "flotilla_operator_records_deleted_total", "flotilla_registered_brokers",
                   "flotilla_operator_rebalance_partitions_remaining", "flotilla_reassignment_bytes_in_total",
                   "flotilla_replication_throttle_limit_bytes"):
        assert needed in used, needed
    assert "flotilla:log_dir_usable_ratio" in used  # a recorded name, not scraped (the e2e test skips it)


def test_exported_names_follow_the_metric_types():
    text = ("# HELP a_total x\n# TYPE a counter\n"
            "# HELP h x\n# TYPE h histogram\n"
            "# HELP g x\n# TYPE g gauge\ng 1.0\n")
    assert monitoring_names.exported(text) == {"a_total", "h_bucket", "h_sum", "h_count", "g"}


def test_chart_switches_default_to_auto():
    values = yaml.safe_load((ROOT / "charts" / "flotilla" / "values.yaml").read_text())
    assert values["podMonitor"]["enabled"] == "auto" and values["podMonitor"]["brokers"] is True
    assert values["prometheusRule"]["enabled"] == "auto"
    assert values["dashboards"]["enabled"] == "auto"
    assert values["dashboards"]["labels"] == {"grafana_dashboard": "1"}
