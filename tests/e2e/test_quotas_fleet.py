"""Client quotas in a fleet: three brokers on Kubernetes metadata share their dynamic quotas
through one ConfigMap (broker/metadata/kube_quotas.py). AlterClientQuotas answered by one broker
is listed by DescribeClientQuotas on that broker at once (it applies its own write) and on the
other two once their watch delivers it, and enforced there: a producer on another broker sees the
throttle. Removing it through a third broker lifts it everywhere.

    pytest -m kube tests/e2e/test_quotas_fleet.py
"""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.e2e.test_quotas import alter_quotas, describe_quotas, kafka_configs
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.flotilla_only("a Flotilla cluster on Kubernetes metadata")]


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3) as c:
        yield c


def quotas_of(bootstrap: str):
    """(error code, {entity: {key: value}}) as DescribeClientQuotas on `bootstrap` answers."""
    return describe_quotas(bootstrap, [("client-id", 2, None)])


def wait_seen(bootstrap: str, expected) -> None:
    """Until DescribeClientQuotas on `bootstrap` answers `expected`; a timeout shows its answer."""
    wait_for(f"DescribeClientQuotas on {bootstrap} to answer {expected}", lambda: quotas_of(bootstrap),
             until=lambda got: got == (0, expected), timeout=60, interval=0.1)


def throttle_ms_of_produce(bootstrap: str, topic: str, partition: int, client_id: str) -> int:
    """Produce 256 KiB in one request as `client_id` and return the answer's throttle time."""
    from bench.clients.quota_neighbours import produce_request

    batch = kafka_wire.build_batch([(None, b"q" * 1024) for _ in range(256)])
    req = produce_request(topic, batch)
    if partition:
        import dataclasses

        td = req.topic_data[0]
        req = dataclasses.replace(req, topic_data=(dataclasses.replace(td, partition_data=(
            dataclasses.replace(td.partition_data[0], index=partition),)),))
    with kafka_wire.KafkaConnection(bootstrap, client_id=client_id) as conn:
        resp = conn.request(req)
    assert resp.responses[0].partition_responses[0].error_code == ErrorCode.none
    return int(resp.throttle_time.total_seconds() * 1000)


def test_quota_altered_on_one_broker_applies_on_every_broker(cluster):
    a, b, c = cluster.brokers
    entity = frozenset({("client-id", "fleet-app")})
    assert alter_quotas(a.bootstrap, [({"client-id": "fleet-app"}, {"producer_byte_rate": 10240})]) == [(0, None)]
    expected = {entity: {"producer_byte_rate": 10240.0}}
    assert quotas_of(a.bootstrap) == (0, expected)  # the writer applies its own write before answering
    for other in (b, c):
        wait_seen(other.bootstrap, expected)

    # enforced where the partition's leader is, whichever broker took the AlterClientQuotas
    topic = kafka_wire.unique_topic("fleetq")
    with kafka_wire.connect(a.bootstrap) as conn:
        assert conn.create_topic(topic, 3) == ErrorCode.none
    leaders = cluster.wait_leaders(topic, 3)
    elsewhere = sorted((p, leader) for p, leader in leaders.items() if leader != a.node_id)
    assert elsewhere, f"every partition is led by broker {a.node_id}, which took the AlterClientQuotas: {leaders}"
    partition, leader = elsewhere[0]
    bootstrap = cluster.broker(leader).bootstrap
    assert throttle_ms_of_produce(bootstrap, topic, partition, "fleet-app") > 0
    assert throttle_ms_of_produce(bootstrap, topic, partition, "fleet-other") == 0

    # removed through a third broker: gone everywhere
    assert alter_quotas(c.bootstrap, [({"client-id": "fleet-app"}, {"producer_byte_rate": None})]) == [(0, None)]
    assert quotas_of(c.bootstrap) == (0, {})
    for broker in (a, b):
        wait_seen(broker.bootstrap, {})


def test_java_admin_client_kafka_configs_applies_on_every_broker(cluster):
    a, b, c = cluster.brokers
    kafka_configs(b.bootstrap, "--alter", "--add-config", "consumer_byte_rate=20480", "--entity-type", "clients",
                  "--entity-default")
    expected = {frozenset({("client-id", None)}): {"consumer_byte_rate": 20480.0}}
    for broker in (a, b, c):
        wait_seen(broker.bootstrap, expected)
    out = kafka_configs(c.bootstrap, "--describe", "--entity-type", "clients", "--entity-default")
    assert "consumer_byte_rate=20480.0" in out, out
