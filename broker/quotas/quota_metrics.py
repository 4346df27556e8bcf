"""Prometheus view of KIP-13 quotas, with bounded label cardinality.

Labels are (quota_type, user, client_id) where user/client_id are a sensor's *label*, not its raw
tags (ClientQuotaManager._label): a client-id gets its own series only when a quota entity names
it, up to flotilla.quota.metrics.max.client.ids of them; clients under a default quota share
client_id="<default>", unlimited ones "<none>", names over the cap "<other>". So a broker with
thousands of client-ids and one default quota exports a handful of series per quota type.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from prometheus_client import Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from broker.quotas.quota_manager import QuotaManagers, QuotaSensor, QuotaType

LABELS = ["quota_type", "user", "client_id"]


class QuotaMetrics(Collector):
    def __init__(self, registry: "CollectorRegistry") -> None:
        self.throttle_seconds = Counter(
            "flotilla_quota_throttle_time_seconds", "Throttle time given to clients, per quota that caused it",
            LABELS, registry=registry)
        self.throttled_requests = Counter(
            "flotilla_quota_throttled_requests", "Requests answered with a throttle time, per quota that caused it",
            LABELS, registry=registry)
        self._managers: "QuotaManagers | None" = None
        registry.register(self)

    def watch(self, managers: "QuotaManagers") -> None:
        self._managers = managers

    def on_throttle(self, quota_type: "QuotaType", sensor: "QuotaSensor", throttle_ms: int) -> None:
        labels = (quota_type.label, *sensor.label)
        self.throttle_seconds.labels(*labels).inc(throttle_ms / 1000.0)
        self.throttled_requests.labels(*labels).inc()

    def collect(self) -> Iterable[GaugeMetricFamily]:
        rate = GaugeMetricFamily(
            "flotilla_quota_rate", "Rate a quota measures over its window (Kafka's byte-rate / request-time "
            "metrics): bytes/s for produce and fetch, percent of the event loop for request", labels=LABELS)
        limit = GaugeMetricFamily("flotilla_quota_limit", "The bound of the quota governing these clients "
                                  "(per client-id for default quotas)", labels=LABELS)
        if self._managers is not None:
            for m in self._managers.all():
                if not m.enabled:
                    continue
                now = m.clock()
                rates: dict[tuple[str, str], float] = {}
                bounds: dict[tuple[str, str], float] = {}
                for s in list(m.sensors.values()):
                    rates[s.label] = rates.get(s.label, 0.0) + s.rate.measure(now)
                    if s.bound is not None:
                        bounds[s.label] = max(bounds.get(s.label, 0.0), s.bound)
                for label, value in rates.items():
                    rate.add_metric([m.quota_type.label, *label], value)
                for label, value in bounds.items():
                    limit.add_metric([m.quota_type.label, *label], value)
        yield rate
        yield limit
