"""The ClientQuota resource end to end: the operator (kopf, in-process) against the test API server
applies it to a real broker process through AlterClientQuotas, reports what the broker holds,
follows edits, reports a second resource naming the same entity as a conflict, and removes the
quota when the resource is deleted -- so the client gets the broker's default rate again. A
ClientQuota naming a user (with requestPercentage) throttles a producer authenticated as that user
over SASL/SCRAM and not another user.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_quotas.py
"""

from __future__ import annotations

import pytest

from tests.support.kopf_operator import in_process_operator
from tests.e2e.test_operator import CRD_NAMES, apply, condition, free_port, get_json
from tests.e2e.test_quotas import describe_quotas
from tests.e2e.test_quotas_fleet import throttle_ms_of_produce
from tests.e2e.test_user_quotas import produce_throttle_ms, sasl
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import FlotillaBroker
from flotilla.testenv.brokers.crds import install_crds, remove_crds
from tests.support.outside_cluster import stand_in_cluster
from tests.support.secure_broker import make_secure_broker
from flotilla.testenv.brokers.tls_certs import make_pki
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.flotilla_only("the operator drives a Flotilla broker")]

DEFAULT_RATE = 4 * 1024 * 1024  # the broker's static default for every client-id


@pytest.fixture(scope="module")
def quota_crds(kube_env):
    install_crds(kube_env)
    yield CRD_NAMES
    remove_crds(kube_env)


@pytest.fixture(scope="module")
def real_broker(tmp_path_factory):
    b = FlotillaBroker(tmp_path_factory.mktemp("quota-broker"),
                       overrides={"flotilla.quota.producer.byte.rate.default": str(DEFAULT_RATE)})
    b.start()
    try:
        yield b
    finally:
        b.close()


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory):
    """A broker with SASL listeners and the SCRAM users alice and bob (tests/support/secure_broker.py)."""
    base = tmp_path_factory.mktemp("quota-secure")
    sb = make_secure_broker("flotilla", base / "broker", make_pki(base / "pki"))
    sb.broker.start()
    try:
        yield sb
    finally:
        sb.broker.close()


@pytest.fixture(scope="module")
def quota_operator(kube_env, quota_crds, real_broker):
    with in_process_operator({"KUBECONFIG": str(kube_env.kubeconfig),
                              "FLOTILLA_OPERATOR_METRICS_ADDRESS": f"127.0.0.1:{free_port()}",
                              "FLOTILLA_OPERATOR_LIVENESS_ADDRESS": "off"}) as runner:
        yield runner


def quota(name: str, ns: str, client_id: str | None, entity: dict | None = None, **rates) -> dict:
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterRef": {"name": "demo"}, "entity": entity or {"clientId": client_id}, **rates}}


def status_of(kube_env, ns: str, name: str, reason: str, brokers=None):
    def check():
        obj = get_json(kube_env, "clientquota", name, "-n", ns, check=False)
        ready = condition(obj, "Ready")
        if ready.get("reason") != reason or ready.get("observedGeneration") != obj["metadata"]["generation"]:
            return None
        if brokers is not None and obj["status"].get("brokers") != brokers:
            return None
        return obj
    return wait_for(f"clientquota {name}: {reason} {brokers}", check, timeout=60)


def test_client_quota_resource_applies_edits_conflicts_and_deletes(kube_env, kube_namespace, quota_operator,
                                                                    real_broker):
    ns, b = kube_namespace, real_broker.bootstrap
    # The broker is a process on this host: the KafkaCluster "demo" names its address (the
    # operator looks it up per cluster, as it would the bootstrap Service in a real deployment).
    apply(kube_env, stand_in_cluster("demo", ns, b))
    topic = kafka_wire.unique_topic("opq")
    with kafka_wire.connect(b) as conn:
        assert conn.create_topic(topic, 1) == 0
    entity = frozenset({("client-id", "opq-app")})

    apply(kube_env, quota("opq", ns, "opq-app", producerByteRate=10240))
    got = status_of(kube_env, ns, "opq", "Applied", [{"nodeId": 1, "producerByteRate": 10240}])
    assert condition(got, "Ready")["status"] == "True"
    assert describe_quotas(b, [("client-id", 0, "opq-app")], strict=True) == (0, {entity: {"producer_byte_rate": 10240.0}})
    # the client gets the quota's rate: 256 KiB at once is far over 10 KiB/s
    assert throttle_ms_of_produce(b, topic, 0, "opq-app") > 0

    # edit: a new value and a second key
    apply(kube_env, quota("opq", ns, "opq-app", producerByteRate=20480, consumerByteRate=40960))
    status_of(kube_env, ns, "opq", "Applied", [{"nodeId": 1, "producerByteRate": 20480, "consumerByteRate": 40960}])

    # a second resource naming the same entity: reported, not applied
    apply(kube_env, quota("opq-dup", ns, "opq-app", producerByteRate=999999))
    dup = status_of(kube_env, ns, "opq-dup", "Conflict")
    assert "opq" in condition(dup, "Ready")["message"]
    assert describe_quotas(b, [("client-id", 0, "opq-app")], strict=True)[1][entity]["producer_byte_rate"] == 20480.0
    kube_env.kubectl("delete", "clientquota", "opq-dup", "-n", ns, "--wait=true", "--timeout=60s")
    assert describe_quotas(b, [("client-id", 0, "opq-app")], strict=True)[1][entity]["producer_byte_rate"] == 20480.0

    # deleting the owner removes the quota: the client is back on the broker's default rate
    kube_env.kubectl("delete", "clientquota", "opq", "-n", ns, "--wait=true", "--timeout=60s")
    # the operator removes it when its watch delivers the DELETED event, after the object is gone
    wait_for("the deleted ClientQuota's quota removed from the broker",
             lambda: describe_quotas(b, [("client-id", 0, "opq-app")], strict=True),
             until=lambda got: got == (0, {}), timeout=60)
    assert throttle_ms_of_produce(b, topic, 0, "opq-app") == 0


def test_user_quota_resource_throttles_the_scram_user_only(kube_env, kube_namespace, quota_operator, secure_broker):
    ns, b = kube_namespace, secure_broker.broker.bootstrap  # the operator uses the PLAINTEXT listener
    apply(kube_env, stand_in_cluster("demo", ns, b))
    topic = kafka_wire.unique_topic("opuq")
    with kafka_wire.connect(b) as conn:
        assert conn.create_topic(topic, 1) == 0

    apply(kube_env, quota("alice", ns, None, {"user": "alice"}, producerByteRate=10240, requestPercentage=150.5))
    status_of(kube_env, ns, "alice", "Applied", [{"nodeId": 1, "producerByteRate": 10240, "requestPercentage": 150.5}])
    assert describe_quotas(b, [("user", 0, "alice")], strict=True) == (
        0, {frozenset({("user", "alice")}): {"producer_byte_rate": 10240.0, "request_percentage": 150.5}})
    # the quota follows the authenticated user, whatever the client-id
    assert produce_throttle_ms(sasl(secure_broker, "alice"), topic, "opuq-app") > 0
    assert produce_throttle_ms(sasl(secure_broker, "bob"), topic, "opuq-app") == 0
