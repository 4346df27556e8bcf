"""Replication metrics, read from the replica manager and the controller at scrape time (Kafka's
ReplicaManager and KafkaController gauges), with labels bounded by the number of brokers:

- flotilla_under_replicated_partitions: partitions led here whose ISR is smaller than their replica
  list (what a rolling restart waits to reach zero on every broker before the next);
- flotilla_under_min_isr_partitions: partitions led here whose ISR is smaller than their
  min.insync.replicas (capped by the replica count, as Produce checks it): acks=all writes to
  them fail with NOT_ENOUGH_REPLICAS (Kafka's UnderMinIsrPartitionCount);
- flotilla_offline_partitions: partitions without a leader, reported by the active controller only
  (0 elsewhere, as Kafka's OfflinePartitionsCount);
- flotilla_isr_shrinks / flotilla_isr_expands: ISR changes this broker wrote as leader;
- flotilla_isr_writes_unknown_outcome: ISR writes whose outcome was unknown (timed out, cut, 5xx),
  after which the leader kept its maximal ISR and wrote the change again;
- flotilla_follower_max_lag_offsets{follower}: over the partitions led here, the most offsets a
  follower's log end is behind the leader's (Kafka's per-fetcher MaxLag, seen from the leader);
- flotilla_replica_fetches{leader}: fetch round trips this broker's replica fetchers made.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.replica.partition import effective_min_isr

if TYPE_CHECKING:
    from broker.controller.controller import Controller
    from broker.replica.replica_fetcher import ReplicaFetcherManager
    from broker.replica.replica_manager import ReplicaManager


class ReplicationCollector(Collector):
    def __init__(self, replicas: "ReplicaManager", controller: "Controller",
                 fetchers: "ReplicaFetcherManager") -> None:
        self.replicas, self.controller, self.fetchers = replicas, controller, fetchers

    def collect(self) -> Iterable:
        rm = self.replicas
        under = under_min_isr = 0
        lag: dict[int, int] = {}
        for part in list(rm.partitions.values()):
            rs = part.replica_state
            if rs is None:
                continue
            if len(rs.isr) < len(rs.replicas):
                under += 1
            if not rs.has_min_isr(effective_min_isr(part)):
                under_min_isr += 1
            leo = part.log.log_end_offset
            for f in rs.followers.values():
                behind = leo - f.log_end_offset if f.log_end_offset >= 0 else leo
                lag[f.broker_id] = max(lag.get(f.broker_id, 0), behind)
        g = GaugeMetricFamily("flotilla_under_replicated_partitions",
                              "Partitions led here with fewer in-sync replicas than replicas")
        g.add_metric([], under)
        yield g
        g = GaugeMetricFamily("flotilla_under_min_isr_partitions",
                              "Partitions led here with fewer in-sync replicas than min.insync.replicas")
        g.add_metric([], under_min_isr)
        yield g
        offline = 0
        if self.controller.active:
            for t in rm.store.image.topics.values():
                offline += sum(1 for s in t.assignment or () if s.leader < 0)
        g = GaugeMetricFamily("flotilla_offline_partitions",
                              "Partitions without a leader (reported by the active controller; 0 elsewhere)")
        g.add_metric([], offline)
        yield g
        c = CounterMetricFamily("flotilla_isr_shrinks", "ISR shrinks this broker wrote as leader")
        c.add_metric([], rm.isr_shrinks)
        yield c
        c = CounterMetricFamily("flotilla_isr_expands", "ISR expansions this broker wrote as leader")
        c.add_metric([], rm.isr_expands)
        yield c
        c = CounterMetricFamily("flotilla_isr_writes_unknown_outcome",
                                "ISR writes whose outcome was unknown; the maximal ISR was kept and the change written again")
        c.add_metric([], rm.isr_writes_unknown)
        yield c
        g = GaugeMetricFamily("flotilla_follower_max_lag_offsets",
                              "Most offsets a follower is behind over the partitions led here", labels=["follower"])
        for broker_id in sorted(lag):
            g.add_metric([str(broker_id)], lag[broker_id])
        yield g
        c = CounterMetricFamily("flotilla_replica_fetches", "Fetch round trips of this broker's replica fetchers",
                                labels=["leader"])
        for leader, fetcher in sorted(self.fetchers.fetchers.items()):
            c.add_metric([str(leader)], fetcher.fetches)
        yield c
