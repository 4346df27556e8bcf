"""Transaction coordinator metrics, read at scrape time (labels bounded: state names only):

- flotilla_transactions{state}: transactional ids in each state in the shards loaded here;
- flotilla_transactions_started: transactions this coordinator moved to Ongoing (the first
  AddPartitionsToTxn/AddOffsetsToTxn after Empty, CompleteCommit or CompleteAbort);
- flotilla_transactions_ended{result}: transactions this coordinator moved to PrepareCommit
  ("commit") or PrepareAbort ("abort");
- flotilla_transactions_timed_out: ongoing transactions aborted for passing their timeout;
- flotilla_transaction_markers_written: markers partition leaders acknowledged;
- flotilla_transaction_marker_seconds: time from PrepareCommit/PrepareAbort to the last marker
  (summary: count and sum);
- flotilla_transaction_coordinator_load_seconds: time spent loading shards (summary).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from broker.coordinator.transaction.state import TxnState

if TYPE_CHECKING:
    from broker.coordinator.transaction.coordinator import TransactionCoordinator


class TransactionCollector(Collector):
    def __init__(self, coordinator: "TransactionCoordinator") -> None:
        self.coordinator = coordinator

    def collect(self) -> Iterable:
        c = self.coordinator
        counts = {s.kafka_name: 0 for s in TxnState}
        for shard in list(c.shards.values()):
            for m in shard.txns.values():
                counts[m.state.kafka_name] += 1
        g = GaugeMetricFamily("flotilla_transactions", "Transactional ids by state, in the shards loaded here",
                              labels=["state"])
        for state, n in counts.items():
            g.add_metric([state], n)
        yield g
        started = CounterMetricFamily("flotilla_transactions_started", "Transactions moved to Ongoing here")
        started.add_metric([], c.stats.started)
        yield started
        ended = CounterMetricFamily("flotilla_transactions_ended",
                                    "Transactions moved to PrepareCommit/PrepareAbort here", labels=["result"])
        ended.add_metric(["commit"], c.stats.committed)
        ended.add_metric(["abort"], c.stats.aborted)
        yield ended
        t = CounterMetricFamily("flotilla_transactions_timed_out", "Ongoing transactions aborted for their timeout")
        t.add_metric([], c.stats.timed_out)
        yield t
        w = CounterMetricFamily("flotilla_transaction_markers_written", "Markers acknowledged by partition leaders")
        w.add_metric([], c.markers.sent)
        yield w
        s = SummaryMetricFamily("flotilla_transaction_marker_seconds",
                                "From PrepareCommit/PrepareAbort to the last marker acknowledged",
                                count_value=c.stats.marker_rounds, sum_value=c.stats.marker_seconds)
        yield s
        s = SummaryMetricFamily("flotilla_transaction_coordinator_load_seconds", "Time spent loading shards",
                                count_value=c.stats.loads, sum_value=c.stats.load_seconds)
        yield s
