"""Partition reassignment metrics (KIP-455), Kafka's where Kafka has them:

- flotilla_reassigning_partitions: partitions led here with a reassignment in progress (Kafka's
  kafka.server:type=ReplicaManager,name=ReassigningPartitions), read at scrape time;
- flotilla_reassignment_bytes_in: record bytes this broker appended as a replica being added by a
  reassignment (Kafka's BrokerTopicMetrics ReassignmentBytesInPerSec, counted where the replica
  fetcher appends);
- flotilla_reassignment_bytes_out: record bytes this broker sent as leader to followers being added
  by a reassignment (Kafka's ReassignmentBytesOutPerSec, counted where Fetch answers a follower);
- flotilla_stray_logs_deleted: partition directories deleted at start-up because the metadata
  places the partition elsewhere; flotilla_stray_logs_kept: `-stray` directories kept in the log
  dirs (their topic was not in the metadata; replica/stray_logs.py), for an operator to delete.

Prometheus computes the rates (`rate(flotilla_reassignment_bytes_in_total[1m])`); the counters are
totals since the broker started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Mapping, Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from broker.metadata.store import MetadataImage


class ReplicaView(Protocol):
    """What the collector reads of the replica manager (declared here, so this module, which the
    replica manager imports, does not import it back)."""

    store: Any
    partitions: Mapping[tuple[str, int], Any]
    reassignment_bytes: "ReassignmentBytes"
    stray_logs_deleted: int
    stray_logs_kept: int


class ReassignmentBytes:
    """The two byte counters, bumped on the data paths."""

    def __init__(self) -> None:
        self.bytes_in = 0
        self.bytes_out = 0


def is_adding(image: "MetadataImage", topic: str, index: int, broker_id: int) -> bool:
    """Whether `broker_id` is a replica being added to the partition by a reassignment."""
    record = image.topics.get(topic)
    if record is None or record.assignment is None or index >= len(record.assignment):
        return False
    return broker_id in record.assignment[index].adding


def count_in(counters: ReassignmentBytes, image: "MetadataImage", topic: str, index: int, node_id: int,
             size: int) -> None:
    """A follower append of `size` bytes on this broker (`node_id`)."""
    if size and is_adding(image, topic, index, node_id):
        counters.bytes_in += size


def count_out(counters: ReassignmentBytes, image: "MetadataImage", topics, replica_id: int) -> None:
    """A Fetch answer to follower `replica_id`: its partitions' record bytes where it is being added."""
    for t in topics:
        for p in t.partitions:
            size = p.records_size
            if size and t.name is not None and is_adding(image, t.name, p.partition_index, replica_id):
                counters.bytes_out += size


def reassigning_led(rm: ReplicaView) -> int:
    """Partitions this broker leads whose image state has a reassignment in progress."""
    image = rm.store.image
    n = 0
    for (topic, index), part in list(rm.partitions.items()):
        if part.replica_state is None:
            continue
        record = image.topics.get(topic)
        if record is not None and record.assignment is not None and index < len(record.assignment):
            state = record.assignment[index]
            n += bool(state.adding or state.removing)
    return n


class ReassignmentCollector(Collector):
    def __init__(self, replicas: ReplicaView) -> None:
        self.replicas = replicas

    def collect(self) -> Iterable:
        rm = self.replicas
        g = GaugeMetricFamily("flotilla_reassigning_partitions",
                              "Partitions led here with a reassignment in progress")
        g.add_metric([], reassigning_led(rm))
        yield g
        c = CounterMetricFamily("flotilla_reassignment_bytes_in",
                                "Record bytes appended here as a replica being added by a reassignment")
        c.add_metric([], rm.reassignment_bytes.bytes_in)
        yield c
        c = CounterMetricFamily("flotilla_reassignment_bytes_out",
                                "Record bytes sent as leader to followers being added by a reassignment")
        c.add_metric([], rm.reassignment_bytes.bytes_out)
        yield c
        c = CounterMetricFamily("flotilla_stray_logs_deleted",
                                "Partition directories deleted at start-up: the metadata places them elsewhere")
        c.add_metric([], rm.stray_logs_deleted)
        yield c
        g = GaugeMetricFamily("flotilla_stray_logs_kept",
                              "Directories renamed -stray at start-up and kept (their topic was not in the metadata)")
        g.add_metric([], rm.stray_logs_kept)
        yield g
