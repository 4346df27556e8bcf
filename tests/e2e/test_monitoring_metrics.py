"""Every metric the shipped alerts and dashboards name (monitoring/) is exported: read from the
/metrics of a real broker after a little traffic (a produce, a consumer with an incremental fetch
session, a client held to a produce quota) and of the operator run as in test_operator.py, with a
KafkaCluster for it to report on. Counters are matched as `_total`, histograms and summaries by
their `_bucket`/`_sum`/`_count` series, recording-rule names (`flotilla:...`) are not scraped
(tests/support/monitoring_names.py). A labelled metric nothing has touched yet counts as exported
when the page declares its family; the traffic makes sure the main ones have samples."""

from __future__ import annotations

import json
import os
import re
import urllib.request
import uuid

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from tests.support import monitoring_names
from flotilla.testenv.brokers.broker_process import free_port
from flotilla.testenv.brokers.crds import install_crds, remove_crds
from tests.support.prometheus import metric
from flotilla.testenv.waiting import wait_for

THROTTLED_CLIENT = "monitoring-throttled"


def scrape(url: str) -> str:
    return urllib.request.urlopen(url, timeout=5).read().decode()


def broker_metric_names() -> dict[str, set[str]]:
    return {n: w for n, w in monitoring_names.used().items()
            if n.startswith("flotilla_") and not n.startswith("flotilla_operator_")}


def operator_metric_names() -> dict[str, set[str]]:
    """The operator's, less those only --leader-elect exports (this module runs it without;
    tests/e2e/test_operator_failover.py reads them from two elected replicas)."""
    return {n: w for n, w in monitoring_names.used().items()
            if n.startswith("flotilla_operator_") and n not in monitoring_names.ELECTION_ONLY}


def test_every_name_used_is_the_brokers_the_operators_or_recorded():
    """A name that is neither scraped (flotilla_*) nor defined by a recording rule would be checked
    by neither test below."""
    used = set(monitoring_names.used())
    recorded = monitoring_names.recorded()
    assert recorded and all(":" in n for n in recorded)
    assert used == (set(broker_metric_names()) | set(operator_metric_names()) | (used & recorded)
                    | (used & monitoring_names.ELECTION_ONLY))


def _traffic(bootstrap: str, url: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from tests.e2e.test_quotas import alter_quotas

    topic = kafka_wire.unique_topic("mon")
    with kafka_wire.connect(bootstrap) as c:
        assert c.create_topic(topic, 1) == ErrorCode.none
        batch = kafka_wire.build_batch([(None, b"v%d" % i) for i in range(10)])
        assert c.produce(topic, 0, batch).error_code == ErrorCode.none
    # kafka-python opens a fetch session and then fetches incrementally.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             auto_offset_reset="earliest", request_timeout_ms=30000)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        got: list = []
        wait_for("kafka-python to read 10 records and fetch incrementally",
                 lambda: got.extend(m for ms in consumer.poll(timeout_ms=200).values() for m in ms)
                 or (len(got), metric(url, "flotilla_fetch_requests_total", kind="incremental")),
                 until=lambda state: state[0] >= 10 and state[1] > 0, timeout=60)
    finally:
        consumer.close()
    # A client-id held to 1 KiB/s is throttled by the second window of 8 KiB batches.
    (answer,) = alter_quotas(bootstrap, [({"client-id": THROTTLED_CLIENT}, {"producer_byte_rate": 1024})])
    assert answer[0] == ErrorCode.none, answer
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id=THROTTLED_CLIENT, linger_ms=0)
    try:
        def produce_and_read_throttle() -> float:
            for _ in range(4):
                producer.send(topic, b"x" * 8192)
            producer.flush(timeout=30)
            return metric(url, "flotilla_quota_throttle_time_seconds_total", client_id=THROTTLED_CLIENT)

        wait_for(f"{THROTTLED_CLIENT} to be throttled by its produce quota", produce_and_read_throttle,
                 until=lambda seconds: seconds > 0, timeout=90)
    finally:
        producer.close(timeout=10)


@pytest.mark.flotilla_only("reads Flotilla's /metrics")
@pytest.mark.timeout(240)
def test_a_running_broker_exports_every_broker_metric_the_rules_and_dashboards_use(broker):
    _traffic(broker.bootstrap, broker.metrics_url)
    text = scrape(broker.metrics_url)
    exported = monitoring_names.exported(text)
    missing = {n: sorted(w) for n, w in broker_metric_names().items() if n not in exported}
    assert not missing, f"used by rules/dashboards but not exported by the broker: {missing}"
    # The traffic reached the metrics the dashboards are about (samples, not just declarations).
    assert metric(broker.metrics_url, "flotilla_topic_bytes_in_total") > 0
    assert metric(broker.metrics_url, "flotilla_request_latency_seconds_count", api="produce") > 0
    assert metric(broker.metrics_url, "flotilla_quota_limit", client_id=THROTTLED_CLIENT) == 1024
    assert metric(broker.metrics_url, "flotilla_controller_active") == 1
    assert metric(broker.metrics_url, "flotilla_log_dir_total_bytes") > 0
    for name in ("flotilla_incremental_fetch_session_evictions_total", "flotilla_under_min_isr_partitions",
                 "flotilla_registered_brokers", "flotilla_transactions", "flotilla_log_dir_usable_bytes",
                 "flotilla_reassigning_partitions", "flotilla_reassignment_bytes_in_total",
                 "flotilla_replication_throttle_rate_bytes"):
        assert re.search(rf"^{name}[{{ ]", text, re.MULTILINE), f"{name}: no sample"


# -- the operator ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crds(kube_env):
    install_crds(kube_env)
    yield
    remove_crds(kube_env)


@pytest.fixture(scope="module")
def operator_metrics_url(kube_env, crds):
    from kopf.testing import KopfRunner

    url = f"http://127.0.0.1:{free_port()}/metrics"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(kube_env.kubeconfig))
        mp.setenv("FLOTILLA_OPERATOR_RESYNC_SECONDS", "3")
        mp.setenv("FLOTILLA_OPERATOR_METRICS_ADDRESS", url.removeprefix("http://").removesuffix("/metrics"))
        mp.setenv("FLOTILLA_OPERATOR_LIVENESS_ADDRESS", "off")
        mp.setenv("FLOTILLA_BROKER_IMAGE", os.environ.get("FLOTILLA_IMAGE", "flotilla:never-pulled"))
        with KopfRunner(["run", "--all-namespaces", "--standalone", "-m", "flotilla_operator.handlers"],
                        timeout=60) as runner:
            yield url
    assert runner.exception is None, runner.output[-4000:]


@pytest.mark.kube
@pytest.mark.flotilla_only("the operator's own metrics")
@pytest.mark.timeout(240)
def test_the_operator_exports_every_operator_metric_the_rules_and_dashboards_use(kube_env, operator_metrics_url):
    namespace = f"mon-{uuid.uuid4().hex[:8]}"
    kube_env.kubectl("create", "namespace", namespace)
    try:
        cluster = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
                   "metadata": {"name": "mon", "namespace": namespace},
                   "spec": {"replicas": 3, "storage": {"type": "ephemeral", "size": "1Gi"}}}
        kube_env.kubectl("apply", "-f", "-", input=json.dumps(cluster))
        # The per-cluster gauges appear once the operator has reconciled it.
        # (tests.support.prometheus.metric takes the metric as `name`, which is also this label.)
        desired = f'flotilla_operator_desired_brokers{{name="mon",namespace="{namespace}"}}'
        wait_for("the operator to report the KafkaCluster's desired brokers",
                 lambda: [line for line in scrape(operator_metrics_url).splitlines() if line.startswith(desired)],
                 until=lambda lines: lines == [f"{desired} 3.0"], timeout=120)
        text = scrape(operator_metrics_url)
        exported = monitoring_names.exported(text)
        missing = {n: sorted(w) for n, w in operator_metric_names().items() if n not in exported}
        assert not missing, f"used by rules/dashboards but not exported by the operator: {missing}"
        assert f'flotilla_operator_ready_brokers{{name="mon",namespace="{namespace}"}}' in text
    finally:
        kube_env.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found", check=False, timeout=30)
