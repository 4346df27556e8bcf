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
