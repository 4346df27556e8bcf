"""Prometheus view of the replication throttles (quotas/replication_quota.py), one series per side
(leader, follower): Kafka's LeaderReplication / FollowerReplication byte-rate, with the bound and
what was held back so an operator can tell a throttle that slows a move from one that does nothing."""

from __future__ import annotations

from typing import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.quotas.replication_quota import ReplicationQuotas


class ReplicationQuotaMetrics(Collector):
    def __init__(self, registry, quotas: ReplicationQuotas) -> None:
        self.quotas = quotas
        registry.register(self)

    def collect(self) -> Iterable:
        rate = GaugeMetricFamily("flotilla_replication_throttle_rate_bytes",
                                 "Bytes/s of throttled partitions replicated (measured over the quota window)",
                                 labels=["side"])
        limit = GaugeMetricFamily("flotilla_replication_throttle_limit_bytes",
                                  "The replication throttle rate in force (leader/follower.replication.throttled.rate);"
                                  " absent when unlimited", labels=["side"])
        partitions = GaugeMetricFamily("flotilla_replication_throttled_partitions",
                                       "Partitions throttled on this broker (*.replication.throttled.replicas)",
                                       labels=["side"])
        moved = CounterMetricFamily("flotilla_replication_throttled_bytes",
                                    "Bytes of throttled partitions replicated", labels=["side"])
        held = CounterMetricFamily("flotilla_replication_throttle_held_back",
                                   "Partition reads left out of a replica fetch because the throttle was exceeded",
                                   labels=["side"])
        for q in self.quotas.sides():
            rate.add_metric([q.side], q.measured())
            if q.bound is not None:
                limit.add_metric([q.side], q.bound)
            partitions.add_metric([q.side], len(q.partitions))
            moved.add_metric([q.side], q.throttled_bytes)
            held.add_metric([q.side], q.held_back)
        return [rate, limit, partitions, moved, held]
