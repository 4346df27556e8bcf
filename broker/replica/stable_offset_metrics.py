"""How far read_committed readers lag behind read_uncommitted ones, per partition led here:
the LSO lag (high watermark - last stable offset), which grows while a transaction stays open
and holds every read_committed consumer of the partition back.

Labels are bounded as the quota metrics' are: only partitions with an open transaction can lag,
and of those only the `flotilla.transaction.metrics.max.partitions` with the largest lag get a
series (ties by topic and partition, so the set is stable between scrapes); the count of all of
them is a single series beside it.

- flotilla_partition_lso_lag_offsets{topic,partition}
- flotilla_partitions_with_open_transactions
"""

from __future__ import annotations

import heapq
from typing import TYPE_CHECKING, Iterable

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from broker.replica.replica_manager import ReplicaManager


def lso_lags(replicas: "ReplicaManager") -> list[tuple[int, str, int]]:
    """(lag, topic, partition) of each partition led here with an open transaction."""
    out = []
    for (topic, partition), part in list(replicas.partitions.items()):
        lg = part.log
        if part.replica_state is None or not lg.producer_state.ongoing:
            continue
        out.append((max(0, lg.high_watermark - lg.last_stable_offset), topic, partition))
    return out


class StableOffsetCollector(Collector):
    def __init__(self, replicas: "ReplicaManager", max_partitions: int) -> None:
        self.replicas, self.max_partitions = replicas, max_partitions

    def collect(self) -> Iterable[GaugeMetricFamily]:
        lags = lso_lags(self.replicas)
        g = GaugeMetricFamily("flotilla_partition_lso_lag_offsets",
                              "High watermark minus last stable offset, for the partitions led here with an open "
                              "transaction and the largest lag (at most flotilla.transaction.metrics.max.partitions)",
                              labels=["topic", "partition"])
        for lag, topic, partition in heapq.nsmallest(self.max_partitions, lags, key=lambda x: (-x[0], x[1], x[2])):
            g.add_metric([topic, str(partition)], lag)
        yield g
        g = GaugeMetricFamily("flotilla_partitions_with_open_transactions",
                              "Partitions led here with an open transaction (their LSO may hold readers back)")
        g.add_metric([], len(lags))
        yield g
