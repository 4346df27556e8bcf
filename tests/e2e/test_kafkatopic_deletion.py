"""Deleting KafkaTopic resources follows the cluster's rules (issue 18, item 10), on three broker
processes with the admission policies of crds/ installed on the test API server:
- `kubectl delete kafkatopics --all` deletes the users' topics but not `__consumer_offsets`
  (internal topics cannot be deleted through their resource): committed offsets survive it;
  DeleteTopics still deletes it, as Kafka does;
- with delete.topic.enable=false a KafkaTopic's deletion is refused, naming the setting, and the
  topic's data stays;
- a KafkaTopic annotated flotilla.io/managed=false can be deleted and its topic stays (same id,
  same partition directories, every record), held by a KafkaTopic the brokers write;
- a namespace deletion is never held up, brokers running or not.

    pytest -m kube tests/e2e/test_kafkatopic_deletion.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.metadata import kube_objects as ko
from broker.replica import partition_metadata
from tests.e2e.test_replication import OVERRIDES, create_topic, producer, read_all
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.timeout(300),
    pytest.mark.flotilla_only("KafkaTopic resources of a Flotilla fleet"),
]

MANAGED = "flotilla.io/managed"  # the annotation users set (Strimzi's strimzi.io/managed)


def kafkatopics(kube_env, ns: str) -> dict[str, dict]:
    """Kafka topic name -> its KafkaTopic."""
    out = json.loads(kube_env.kubectl("get", "kafkatopics", "-n", ns, "-o", "json").stdout)
    return {ko.topic_name_of(o): o for o in out["items"]}


def produce(fleet: BrokerCluster, topic: str, n: int, partitions: int) -> list[bytes]:
    acked: list[bytes] = []
    p = producer(fleet.bootstrap)
    for i in range(n):
        p.produce(topic, partition=i % partitions, value=f"{topic}-{i}".encode(),
                  on_delivery=lambda err, msg: acked.append(msg.value()) if err is None else None)
    assert p.flush(60) == 0 and len(acked) == n
    return acked


def directories(fleet: BrokerCluster, topic: str, partitions: int) -> dict:
    """(broker, partition) -> (inode of the partition directory, its topic id)."""
    out = {}
    for b in fleet.brokers:
        for i in range(partitions):
            d = Path(b.log_dirs) / f"{topic}-{i}"
            out[(b.node_id, i)] = (d.stat().st_ino, partition_metadata.read(d))
    return out


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return {tp.partition: tp.offset for tp in c.committed([TopicPartition(topic, i) for i in range(partitions)],
                                                              timeout=20)}
    finally:
        c.close()


def commit(bootstrap: str, group: str, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


@pytest.fixture
def fleet(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


@pytest.fixture
def no_deletion_fleet(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3,
                       overrides={**OVERRIDES, "delete.topic.enable": "false"}) as c:
        yield c


def test_deleting_every_kafkatopic_keeps_the_internal_topic_and_never_blocks_the_namespace(
        fleet, kube_env, kube_namespace):
    ns = kube_namespace
    topic = create_topic(fleet.brokers[0], 3, rf=3)
    fleet.wait_leaders(topic, 3)
    produce(fleet, topic, 30, 3)
    commit(fleet.bootstrap, "g1", topic, {0: 7, 1: 8, 2: 9})  # creates __consumer_offsets
    assert committed(fleet.bootstrap, "g1", topic, 3) == {0: 7, 1: 8, 2: 9}
    offsets_obj = wait_for("the __consumer_offsets KafkaTopic", lambda: kafkatopics(kube_env, ns).get("__consumer_offsets"),
                           timeout=30)

    r = kube_env.kubectl("delete", "kafkatopics", "--all", "-n", ns, check=False)
    assert r.returncode != 0 and "internal topic __consumer_offsets" in r.stderr, (r.stdout, r.stderr)
    left = kafkatopics(kube_env, ns)
    assert set(left) == {"__consumer_offsets"}
    assert left["__consumer_offsets"]["metadata"]["uid"] == offsets_obj["metadata"]["uid"]
    wait_for(f"{topic} gone from Metadata", lambda: all(
        int(fleet.metadata(b, [topic]).topics[0].error_code) == 3 for b in fleet.brokers), timeout=30)
    # The group's offsets (in __consumer_offsets) are still there.
    assert committed(fleet.bootstrap, "g1", topic, 3) == {0: 7, 1: 8, 2: 9}
    # DeleteTopics may delete it, as Kafka allows (the broker marks the object for the policy).
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": fleet.bootstrap})
    admin.delete_topics(["__consumer_offsets"])["__consumer_offsets"].result(30)
    wait_for("the __consumer_offsets KafkaTopic gone", lambda: "__consumer_offsets" not in kafkatopics(kube_env, ns),
             timeout=30)

    # The namespace goes, internal topic and running brokers notwithstanding.
    kube_env.kubectl("delete", "namespace", ns, "--wait=true", "--timeout=120s", timeout=150)
    gone = kube_env.kubectl("get", "namespace", ns, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr


def test_with_deletion_disabled_a_kafkatopic_deletion_is_refused_and_a_detached_one_keeps_its_topic(
        no_deletion_fleet, kube_env, kube_namespace):
    fleet, ns = no_deletion_fleet, kube_namespace
    # A topic a user declared (object name of their choosing), RF=3, with records.
    manifest = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
                "metadata": {"name": "clicks", "labels": {ko.INSTANCE_LABEL: fleet.name}},
                "spec": {"partitions": 3, "replicas": 3}}
    kube_env.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    fleet.wait_leaders("clicks", 3)
    obj = wait_for("clicks with its id", lambda: (kafkatopics(kube_env, ns).get("clicks") or {}).get("status", {}).get(
        "topicId") and kafkatopics(kube_env, ns)["clicks"], timeout=30)
    topic_id = obj["status"]["topicId"]
    acked = produce(fleet, "clicks", 300, 3)
    dirs = directories(fleet, "clicks", 3)

    r = kube_env.kubectl("delete", "kafkatopic", "clicks", "-n", ns, check=False)
    assert r.returncode != 0 and "delete.topic.enable=false" in r.stderr, (r.stdout, r.stderr)
    assert kafkatopics(kube_env, ns)["clicks"]["metadata"]["uid"] == obj["metadata"]["uid"]

    # Detached, the resource may go; the topic stays, held by a KafkaTopic the brokers write.
    kube_env.kubectl("annotate", "kafkatopic", "clicks", "-n", ns, f"{MANAGED}=false")
    kube_env.kubectl("delete", "kafkatopic", "clicks", "-n", ns)
    held = wait_for("a KafkaTopic of the brokers holding clicks with its id", lambda: (lambda o: o if o and (
        o.get("status") or {}).get("topicId") and o["metadata"]["uid"] != obj["metadata"]["uid"] else None)(
        kafkatopics(kube_env, ns).get("clicks")), timeout=60)
    assert held["metadata"]["name"] == ko.topic_object_name(fleet.name, "clicks")
    assert held["status"]["topicId"] == topic_id
    assert len(held["status"]["assignment"]) == 3
    assert MANAGED not in (held["metadata"].get("annotations") or {})
    fleet.wait_leaders("clicks", 3)
    assert directories(fleet, "clicks", 3) == dirs
    got = read_all(fleet.bootstrap, "clicks", 3, len(acked))
    assert sorted(v for recs in got.values() for _, v in recs) == sorted(acked)
    # Still refused for the brokers' KafkaTopic, which is managed.
    r = kube_env.kubectl("delete", "kafkatopic", held["metadata"]["name"], "-n", ns, check=False)
    assert r.returncode != 0 and "delete.topic.enable=false" in r.stderr
