"""KafkaTopic resources and a real broker fleet (two broker processes, metadata on the test API
server): a topic applied with kubectl becomes usable by Kafka clients, a topic created by a client
appears as a KafkaTopic with the topic id Kafka reports, `kubectl get kafkatopics` shows partitions
and readiness, and deleting a KafkaTopic deletes the topic.

    .venv/bin/pytest -m kube tests/e2e/test_kafkatopics.py
"""

from __future__ import annotations

import json

import pytest

from broker.metadata import kube_objects as ko
from flotilla.testenv import kafka_wire
from tests.support.clients import family, keyed_records, new_group
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]


@pytest.fixture
def fleet(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=2) as c:
        yield c


def kafkatopics(kube_env, ns: str) -> dict[str, dict]:
    out = json.loads(kube_env.kubectl("get", "kafkatopics", "-n", ns, "-o", "json").stdout)
    return {o["spec"].get("topicName") or o["metadata"]["name"]: o for o in out["items"]}


def ready(obj: dict | None) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in ((obj or {}).get("status") or {}).get("conditions") or [])


def test_a_kubectl_applied_topic_is_usable_by_clients(fleet, kube_env, kube_namespace):
    ns = kube_namespace
    manifest = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
                "metadata": {"name": "clicks", "labels": {ko.CLUSTER_LABEL: fleet.name}},
                "spec": {"partitions": 4, "config": {"retention.ms": 86400000}}}
    kube_env.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    obj = wait_for("KafkaTopic clicks Ready", lambda: (lambda o: o if ready(o) else None)(
        kafkatopics(kube_env, ns).get("clicks")), timeout=30)
    assert len(obj["status"]["assignment"]) == 4 and obj["status"]["topicId"]
    leaders = fleet.wait_leaders("clicks", 4)
    assert set(leaders.values()) <= {1, 2}
    row = kube_env.kubectl("get", "kafkatopics", "clicks", "-n", ns, "--no-headers").stdout.split()
    assert row[:9] == ["clicks", fleet.name, "clicks", "4", "1", "0", "0", "True", "Assigned"]
    # Kafka clients see the same topic, with the id and the config the resource holds.
    md = fleet.metadata(fleet.brokers[1], ["clicks"])
    assert ko.topic_id_text(md.topics[0].topic_id) == obj["status"]["topicId"]
    client = family("confluent")
    assert client.topic_config(fleet.bootstrap, "clicks")["retention.ms"] == "86400000"
    sent = keyed_records(80, keys=20)
    client.produce(fleet.brokers[0].bootstrap, "clicks", sent)
    got = client.consume_and_commit(fleet.brokers[1].bootstrap, "clicks", new_group(), len(sent))
    assert sorted((r.key, r.value) for r in got) == sorted(sent)
    assert {r.partition for r in got} == {0, 1, 2, 3}
    # Growing the resource grows the topic.
    kube_env.kubectl("patch", "kafkatopic", "clicks", "-n", ns, "--type=merge", "-p", '{"spec": {"partitions": 6}}')
    fleet.wait_leaders("clicks", 6)
    # Deleting the resource deletes the topic.
    kube_env.kubectl("delete", "kafkatopic", "clicks", "-n", ns)
    wait_for("clicks gone from Metadata", lambda: "clicks" not in client.list_topics(fleet.bootstrap), timeout=30)


def test_a_client_created_topic_appears_as_a_kafkatopic(fleet, kube_env, kube_namespace):
    topic = "Orders_EU.v1"  # not a valid object name: the object is named after it, the name kept in spec
    with kafka_wire.connect(fleet.brokers[1].bootstrap) as conn:
        assert int(conn.create_topic(topic, 3)) == 0
    fleet.wait_leaders(topic, 3)
    obj = wait_for("KafkaTopic Ready", lambda: (lambda o: o if ready(o) else None)(
        kafkatopics(kube_env, kube_namespace).get(topic)), timeout=30)
    assert obj["metadata"]["name"] == ko.topic_object_name(fleet.name, topic)
    assert obj["spec"]["partitions"] == 3 and obj["spec"]["replicas"] == 1
    md = fleet.metadata(fleet.brokers[0], [topic])
    assert ko.topic_id_text(md.topics[0].topic_id) == obj["status"]["topicId"]
    leaders = {int(p.partition_index): int(p.leader_id) for p in md.topics[0].partitions}
    assert {i: a["leader"] for i, a in enumerate(obj["status"]["assignment"])} == leaders


def test_topic_configs_round_trip_between_kafka_clients_and_the_kafkatopic(fleet, kube_env, kube_namespace):
    """IncrementalAlterConfigs through one broker lands in the KafkaTopic's status.config (spec is
    not rewritten: it is what its creator wrote), and a `kubectl patch` of spec.config is in force
    on every broker."""
    from tests.e2e.test_alter_configs import SET, in_force, incremental

    topic = kafka_wire.unique_topic("cfg")
    with kafka_wire.connect(fleet.brokers[0].bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
    fleet.wait_leaders(topic, 1)
    with kafka_wire.connect(fleet.brokers[1].bootstrap) as conn:
        assert incremental(conn, topic, ("retention.ms", SET, "3600000")) == (0, None)
    obj = wait_for("status.config in the KafkaTopic", lambda: (lambda o: o if (o["status"].get("config") or {}).get(
        "retention.ms") is not None else None)(kafkatopics(kube_env, kube_namespace)[topic]), timeout=30)
    assert obj["status"]["config"]["retention.ms"] == "3600000"
    assert obj["spec"]["config"] == {}  # as the broker created it for CreateTopics

    kube_env.kubectl("patch", "kafkatopic", obj["metadata"]["name"], "-n", kube_namespace, "--type=merge",
                     "-p", json.dumps({"spec": {"config": {"retention.ms": "7200000"}}}))
    for b in fleet.brokers:
        with kafka_wire.connect(b.bootstrap) as conn:
            wait_for(f"broker {b.node_id} in force", lambda: in_force(conn, topic)["retention.ms"][0] == "7200000",
                     timeout=30)
