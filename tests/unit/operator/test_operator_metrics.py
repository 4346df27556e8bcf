import urllib.request

import pytest
from prometheus_client import REGISTRY

from flotilla_operator import metrics


def _value(name, **labels):
    return REGISTRY.get_sample_value(name, labels) or 0.0


def test_observe_counts_success_and_errors():
    before_ok = _value("flotilla_operator_reconcile_total", kind="Test", result="success")
    before_err = _value("flotilla_operator_reconcile_errors_total", kind="Test", reason="RuntimeError")
    with metrics.observe("Test"):
        pass
    with pytest.raises(RuntimeError):
        with metrics.observe("Test"):
            raise RuntimeError("boom")
    assert _value("flotilla_operator_reconcile_total", kind="Test", result="success") == before_ok + 1
    assert _value("flotilla_operator_reconcile_errors_total", kind="Test", reason="RuntimeError") == before_err + 1
    assert _value("flotilla_operator_reconcile_duration_seconds_count", kind="Test") >= 2


def test_metrics_server_serves_and_stops():
    server = metrics.MetricsServer("127.0.0.1", 0)
    url = server.start()
    try:
        assert server.port > 0 and url.endswith(f":{server.port}/metrics")
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        assert "flotilla_operator_reconcile_duration_seconds" in body
    finally:
        server.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


def _gauge(gauge, namespace, name):
    return REGISTRY.get_sample_value(f"flotilla_operator_{gauge}", {"namespace": namespace, "name": name})


def test_cluster_gauges_follow_the_status_and_go_with_the_cluster():
    ns, name = "monitoring-ns", "c1"
    metrics.observe_cluster(ns, name, 3, {"readyReplicas": 2, "registeredBrokers": 3, "controller": 1})
    assert _gauge("desired_brokers", ns, name) == 3
    assert _gauge("ready_brokers", ns, name) == 2
    assert _gauge("registered_brokers", ns, name) == 3
    assert _gauge("controller", ns, name) == 1
    # Leases unreadable this time: the last registration view stays; no controller reads as -1.
    metrics.observe_cluster(ns, name, 3, {"readyReplicas": 3})
    assert _gauge("registered_brokers", ns, name) == 3
    metrics.observe_cluster(ns, name, 3, {"readyReplicas": 3, "registeredBrokers": 2, "controller": None})
    assert _gauge("controller", ns, name) == -1
    metrics.forget_cluster(ns, name)
    for gauge in ("desired_brokers", "ready_brokers", "registered_brokers", "controller"):
        assert REGISTRY.get_sample_value(f"flotilla_operator_{gauge}", {"namespace": ns, "name": name}) is None
    metrics.forget_cluster(ns, name)  # twice: nothing left, no error


def _phase(ns, name, phase):
    return REGISTRY.get_sample_value("flotilla_operator_rebalance_phase", {"namespace": ns, "name": name, "phase": phase})


def test_rebalance_gauges_say_the_phase_and_what_remains():
    ns, name = "monitoring-ns", "rb1"
    metrics.observe_rebalance(ns, name, {"phase": "Moving", "partitionsTotal": 14, "partitionsMoved": 6})
    assert _gauge("rebalance_moving", ns, name) == 1
    assert _gauge("rebalance_partitions_remaining", ns, name) == 8
    assert {p: _phase(ns, name, p) for p in ("Idle", "Moving", "Paused", "Blocked")} == \
        {"Idle": 0, "Moving": 1, "Paused": 0, "Blocked": 0}
    # Blocked (a plan that cannot be met): the alert's series; Moving drops to 0.
    metrics.observe_rebalance(ns, name, {"phase": "Blocked", "message": "cannot place every replica"})
    assert _phase(ns, name, "Blocked") == 1 and _phase(ns, name, "Moving") == 0
    assert _gauge("rebalance_moving", ns, name) == 0
    assert _gauge("rebalance_partitions_remaining", ns, name) == 0
    metrics.forget_cluster(ns, name)
    assert all(_phase(ns, name, p) is None for p in ("Idle", "Moving", "Paused", "Blocked"))
    assert _gauge("rebalance_moving", ns, name) is None


def test_a_restarted_operator_reports_the_stored_rebalance_with_the_cluster():
    """observe_rebalance runs only when a rebalance step changes status.rebalance: a Blocked one that
    stays as it is would go unreported after a restart, so the cluster's reconcile reports it too."""
    ns, name = "monitoring-ns", "rb2"
    metrics.observe_cluster(ns, name, 3, {"readyReplicas": 3})
    assert _phase(ns, name, "Blocked") is None  # no rebalance ever ran: no series
    metrics.observe_cluster(ns, name, 2, {"readyReplicas": 3}, {"phase": "Blocked", "partitionsTotal": 4})
    assert _phase(ns, name, "Blocked") == 1
    assert _gauge("rebalance_partitions_remaining", ns, name) == 4
    metrics.forget_cluster(ns, name)


def test_stalled_gauge_follows_the_conditions_written_and_goes_with_the_resource():
    stalled = {"type": "Stalled", "status": "True", "reason": "InvalidSpec"}
    ready = {"type": "Ready", "status": "False"}
    metrics.observe_conditions("KafkaUser", "ns", "u", {"conditions": [ready, stalled]})
    assert REGISTRY.get_sample_value("flotilla_operator_resource_stalled",
                                     {"kind": "KafkaUser", "namespace": "ns", "name": "u"}) == 1
    metrics.observe_conditions("KafkaUser", "ns", "u", {"rebalance": {}})  # no conditions: unchanged
    assert REGISTRY.get_sample_value("flotilla_operator_resource_stalled",
                                     {"kind": "KafkaUser", "namespace": "ns", "name": "u"}) == 1
    metrics.observe_conditions("KafkaUser", "ns", "u", {"conditions": [ready, {**stalled, "status": "False"}]})
    assert REGISTRY.get_sample_value("flotilla_operator_resource_stalled",
                                     {"kind": "KafkaUser", "namespace": "ns", "name": "u"}) == 0
    metrics.observe_conditions("KafkaCluster", "ns", "c", {"conditions": [stalled]})
    metrics.forget_cluster("ns", "c")
    assert REGISTRY.get_sample_value("flotilla_operator_resource_stalled",
                                     {"kind": "KafkaCluster", "namespace": "ns", "name": "c"}) is None


async def test_a_status_written_through_kube_reaches_the_hook():
    from flotilla_operator.clients.kube import Kube

    seen = []

    class Api:
        async def call_api(self, *args, **kwargs):
            return {"status": {}}

    kube = Kube(Api(), "test", on_status=lambda *a: seen.append(a))
    await kube.patch_status("KafkaUser", "ns", "u", {"conditions": []})
    assert seen == [("KafkaUser", "ns", "u", {"conditions": []})]


def test_election_gauges_exist_only_once_asked_for():
    names = {m.name for m in REGISTRY.collect()}
    if "flotilla_operator_leader" not in names:  # another test module may have started an election
        assert "flotilla_operator_ready" not in names
    leader, ready = metrics.election_gauges()
    assert metrics.election_gauges() == (leader, ready)
    assert REGISTRY.get_sample_value("flotilla_operator_leader") is not None
    assert REGISTRY.get_sample_value("flotilla_operator_ready") is not None
