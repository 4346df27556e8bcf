"""The shipped Prometheus rules pass `promtool check rules`, as written (monitoring/) and as the
Helm chart renders them into a PrometheusRule; and the chart creates its monitoring objects when
the cluster serves monitoring.coreos.com/v1 (or when told to), and none otherwise.

promtool is Debian's, unpacked by scripts/setup.d/25-promtool.sh (flotilla.monitoring.promtool);
helm comes from the test control plane's cache, as for install/flotilla.yaml."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from flotilla import install_render
from flotilla.monitoring import promtool as promtool_tool

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "flotilla"
MONITORING_API = ["--api-versions", "monitoring.coreos.com/v1"]


@pytest.fixture(scope="module")
def promtool() -> Path:
    found = promtool_tool.path()
    if found is None:
        pytest.skip("promtool not installed: run scripts/setup.d/25-promtool.sh")
    return found


@pytest.fixture(scope="module")
def helm() -> str:
    try:
        return install_render.helm_binary()
    except install_render.HelmMissing as exc:
        pytest.skip(str(exc))


def template(helm: str, *args: str) -> list[dict]:
    proc = subprocess.run([helm, "template", "flotilla", str(CHART), "--namespace", "ops",
                           "--kube-version", install_render.KUBE_VERSION, *args],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def test_rules_file_passes_promtool(promtool):
    proc = promtool_tool.check_rules(promtool, promtool_tool.RULES)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr


def test_promtool_refuses_a_broken_rule(promtool, tmp_path):
    """The check can fail: a rule with a PromQL syntax error is reported by name."""
    rules = yaml.safe_load(promtool_tool.RULES.read_text())
    rules["groups"][1]["rules"][0]["expr"] = "sum by (pod (flotilla_under_replicated_partitions)"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(rules))
    proc = promtool_tool.check_rules(promtool, bad)
    assert proc.returncode != 0 and "FAILED" in proc.stdout + proc.stderr


def test_chart_rules_pass_promtool(promtool, helm, tmp_path):
    docs = template(helm, *MONITORING_API)
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    rendered = tmp_path / "chart-rules.yaml"
    rendered.write_text(yaml.safe_dump(rule["spec"]))
    assert rule["spec"] == yaml.safe_load(promtool_tool.RULES.read_text())
    proc = promtool_tool.check_rules(promtool, rendered)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_chart_monitoring_follows_the_prometheus_operator_api(helm):
    on = template(helm, *MONITORING_API)
    monitors = {d["metadata"]["name"]: d for d in on if d["kind"] == "PodMonitor"}
    assert set(monitors) == {"flotilla-operator", "flotilla-brokers"}
    brokers = monitors["flotilla-brokers"]["spec"]
    assert brokers["namespaceSelector"] == {"matchNames": ["ops"]}  # the operator's own, as it manages
    (everywhere,) = [d for d in template(helm, *MONITORING_API, "--set", "watchAllNamespaces=true")
                     if d["kind"] == "PodMonitor" and d["metadata"]["name"] == "flotilla-brokers"]
    assert everywhere["spec"]["namespaceSelector"] == {"any": True}
    assert brokers["selector"]["matchLabels"] == {"app.kubernetes.io/name": "flotilla",
                                                 "app.kubernetes.io/component": "broker"}
    assert {r["targetLabel"] for r in brokers["podMetricsEndpoints"][0]["relabelings"]} == {"kafka_cluster"}
    assert monitors["flotilla-operator"]["spec"]["podMetricsEndpoints"][0]["honorLabels"] is True
    dashboards = [d for d in on if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]]
    assert len(dashboards) == 6 and all(d["metadata"]["labels"]["grafana_dashboard"] == "1" for d in dashboards)
    shipped = {p.name: p.read_text().rstrip("\n") for p in (ROOT / "monitoring" / "dashboards").glob("*.json")}
    assert {k: v for d in dashboards for k, v in d["data"].items()} == shipped
    # No Prometheus Operator: nothing of it (install/flotilla.yaml is rendered so).
    off = template(helm)
    assert not [d for d in off if d["kind"] in {"PodMonitor", "PrometheusRule"}]
    assert not [d for d in off if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]]
    # Forced on without the API, off with it, brokers scoped to the watched namespaces.
    forced = template(helm, "--set", "podMonitor.enabled=true", "--set", "watchNamespaces={team-a}")
    (scoped,) = [d for d in forced if d["kind"] == "PodMonitor" and d["metadata"]["name"] == "flotilla-brokers"]
    assert scoped["spec"]["namespaceSelector"] == {"matchNames": ["team-a"]}
    assert not [d for d in forced if d["kind"] == "PrometheusRule"]
    none = template(helm, *MONITORING_API, "--set", "prometheusRule.enabled=false", "--set", "dashboards.enabled=false",
                    "--set", "podMonitor.brokers=false")
    assert [d["metadata"]["name"] for d in none if d["kind"] in {"PodMonitor", "PrometheusRule", "ConfigMap"}] == \
        ["flotilla-operator"]


def test_alerts_fire_on_what_they_watch(promtool):
    """monitoring/prometheus-rules.test.yaml: each alert fires on synthetic series that should wake
    someone (with its labels and annotations), and stays quiet while pending or on harmless ones."""
    tests = promtool_tool.RULES.with_name("prometheus-rules.test.yaml")
    proc = subprocess.run([str(promtool), "test", "rules", str(tests)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SUCCESS" in proc.stdout + proc.stderr
