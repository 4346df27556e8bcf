"""The rebalancer's view of a cluster (reassignment_admin.cluster_view) is one broker's image read
in an order that cannot show a finished move with its removed replica: the in-flight list first,
then Metadata, both from the controller. The brokers here are stand-ins whose image advances
between requests (a move finishes); the real-broker check of the same view is in
tests/e2e/test_reassignment.py."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace as NS

import pytest

from flotilla_operator.clients import reassignment_admin as ra
from flotilla_operator.reconcilers.rebalance import view_of

TOPIC = "__consumer_offsets"
MOVING = (0, 1, 3, 2)  # target (0, 1, 3) followed by the removing replica 2
DONE = (0, 1, 3)


class Broker:
    """One broker's image: partition 0 of TOPIC is moving until `finish()`; a lagging broker still
    shows the move after the controller finished it."""

    def __init__(self, node: int, controller: int) -> None:
        self.node, self.controller, self.done = node, controller, False

    def finish(self) -> None:
        self.done = True

    def metadata(self, topics):
        brokers = [NS(node_id=n, host=f"b{n}", port=9092, rack=None) for n in range(5)]
        parts = [] if topics == () else [NS(partition_index=0, replica_nodes=DONE if self.done else MOVING, leader_id=0)]
        return NS(brokers=brokers, controller_id=self.controller,
                  topics=[] if topics == () else [NS(error_code=0, name=TOPIC, partitions=parts)])

    def reassignments(self):
        if self.node != self.controller:
            return NS(error_code=41, error_message="not the controller", topics=[])
        parts = [] if self.done else [NS(partition_index=0, replicas=MOVING, adding_replicas=(3,), removing_replicas=(2,))]
        return NS(error_code=0, error_message=None, topics=[NS(name=TOPIC, partitions=parts)] if parts else [])


def run_view(monkeypatch, brokers: dict[str, Broker], after_each=lambda calls: None):
    calls: list[tuple[str, str]] = []

    async def request(address, req, timeout=0, auth=ra.PLAINTEXT):
        kind = type(req).__name__
        calls.append((address, kind))
        b = brokers[address]
        out = b.reassignments() if kind == "ListPartitionReassignmentsRequest" else b.metadata(req.topics)
        after_each(calls)
        return out

    async def bootstrap_request(bootstrap, req, auth=ra.PLAINTEXT):
        return await request(bootstrap.split(",")[0], req, auth=auth)

    monkeypatch.setattr(ra, "request", request)
    monkeypatch.setattr(ra, "bootstrap_request", bootstrap_request)
    return asyncio.run(ra.cluster_view("b4:9092")), calls


def test_the_list_and_metadata_come_from_the_controller_in_that_order(monkeypatch):
    controller, lagging = Broker(0, 0), Broker(4, 0)  # the bootstrap lands on broker 4, which lags
    view, calls = run_view(monkeypatch, {"b0:9092": controller, "b4:9092": lagging},
                           after_each=lambda calls: controller.finish() if len(calls) == 2 else None)
    # The move finished right after the list: Metadata from the same broker shows it finished.
    assert [k for _, k in calls] == ["MetadataRequest", "ListPartitionReassignmentsRequest", "MetadataRequest"]
    assert [a for a, _ in calls][1:] == ["b0:9092", "b0:9092"], calls
    assert view.controller == 0 and set(view.brokers) == {0, 1, 2, 3, 4}
    assert view.reassigning[(TOPIC, 0)].target == DONE and view.replicas[(TOPIC, 0)] == DONE


def test_a_view_never_shows_a_finished_move_with_its_removed_replica(monkeypatch):
    """Whenever the move finishes (before, between or after the requests), the partition is
    either in flight or at its three replicas: the rebalancer never plans it at four."""
    for finish_after in range(4):
        controller, lagging = Broker(0, 0), Broker(4, 0)

        def advance(calls, n=finish_after, c=controller):
            if len(calls) == n:
                c.finish()
        if finish_after == 0:
            controller.finish()
        view, _ = run_view(monkeypatch, {"b0:9092": controller, "b4:9092": lagging}, after_each=advance)
        effective = {p: view.reassigning[p].target if p in view.reassigning else r for p, r in view.replicas.items()}
        assert effective[(TOPIC, 0)] == DONE, (finish_after, view)
        rb_view = view_of(view)
        assert len(rb_view.replicas[(TOPIC, 0)]) == 3 or (TOPIC, 0) in rb_view.in_flight, (finish_after, rb_view)


def test_a_view_fails_when_the_named_controller_is_not_one(monkeypatch):
    """A controller that moved between the first Metadata and the list: an AdminError (the step is
    retried), not a view without the moves in flight."""
    brokers = {"b0:9092": Broker(0, 1), "b4:9092": Broker(4, 0)}  # broker 4 names 0, which is not the controller
    with pytest.raises(ra.AdminError, match="ListPartitionReassignments: error 41"):
        run_view(monkeypatch, brokers)
