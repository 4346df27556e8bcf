"""Controller and membership metrics, read at scrape time (Kafka's ActiveControllerCount and the
registered-broker count, here from the Leases behind the metadata store):

- flotilla_controller_active: 1 on the broker that holds the controller Lease and acts on it, 0
  elsewhere (summed over a cluster it must be 1);
- flotilla_controller_id: the controller this broker's metadata image names (-1: none);
- flotilla_registered_brokers: brokers with a live registration (Lease) in this broker's image;
- flotilla_controller_assignment_writes: partition assignments (leaders, ISRs) written while
  controller here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from broker.controller.controller import Controller


class ControllerCollector(Collector):
    def __init__(self, controller: "Controller") -> None:
        self.controller = controller

    def collect(self) -> Iterable:
        c = self.controller
        image = c.store.image
        g = GaugeMetricFamily("flotilla_controller_active", "1 if this broker is the active controller")
        g.add_metric([], 1 if c.active else 0)
        yield g
        g = GaugeMetricFamily("flotilla_controller_id", "The controller named by this broker's metadata (-1: none)")
        g.add_metric([], -1 if image.controller_id is None else image.controller_id)
        yield g
        g = GaugeMetricFamily("flotilla_registered_brokers",
                              "Brokers with a live registration (Lease) in this broker's metadata")
        g.add_metric([], len(image.brokers))
        yield g
        w = CounterMetricFamily("flotilla_controller_assignment_writes",
                                "Partition assignments (leaders, ISRs) written while controller here")
        w.add_metric([], c.writes)
        yield w
