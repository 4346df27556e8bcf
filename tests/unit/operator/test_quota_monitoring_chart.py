"""The chart's quota dashboard and alert examples use metrics the broker really exports, and are
off by default."""

import json
import re
from pathlib import Path

import yaml
from prometheus_client import generate_latest

from broker.metadata.client_quotas import QuotaEntity
from broker.server.metrics import BrokerMetrics
from broker.server.quota_manager import QuotaConfig, QuotaManagers
from broker.server.quota_metrics import QuotaMetrics

CHART = Path(__file__).resolve().parents[3] / "charts" / "flotilla"


def exported_names() -> set[str]:
    metrics = BrokerMetrics()
    qm = QuotaMetrics(metrics.registry)
    managers = QuotaManagers(QuotaConfig(), on_throttle=qm.on_throttle)
    qm.watch(managers)
    managers.update_quotas({QuotaEntity.user_client(client_id="app"): {"producer_byte_rate": 10.0}})
    ms = managers.produce.record_and_get_throttle_ms("ANONYMOUS", "app", 1000)
    managers.produce.record_throttle("ANONYMOUS", "app", ms)
    text = generate_latest(metrics.registry).decode()
    assert 'flotilla_quota_throttled_requests_total{client_id="app",quota_type="produce",user=""} 1.0' in text
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}


def used_names(text: str) -> set[str]:
    return set(re.findall(r"\bflotilla_quota_[a-z_]+", text))


def test_dashboard_and_alerts_use_exported_metrics():
    names = exported_names()
    dashboard = (CHART / "files" / "quota-dashboard.json").read_text()
    json.loads(dashboard)
    rules = (CHART / "templates" / "quota-monitoring.yaml").read_text()
    used = used_names(dashboard) | used_names(rules)
    assert used and used <= names, used - names


def test_off_by_default_and_in_the_schema():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["quotaMonitoring"]["dashboard"]["enabled"] is False
    assert values["quotaMonitoring"]["prometheusRule"]["enabled"] is False
    schema = json.loads((CHART / "values.schema.json").read_text())
    assert set(schema["properties"]["quotaMonitoring"]["properties"]) == {"dashboard", "prometheusRule"}
