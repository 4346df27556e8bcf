"""A KafkaTopic's spec is its creator's (issue 22, "Topics as desired state"): two broker processes,
metadata on the test API server, KafkaTopics applied with server-side apply under a GitOps tool's
field manager. The fleet writes status only, so spec reads back byte for byte as applied and a
second apply changes nothing; CreatePartitions and IncrementalAlterConfigs show in status, and the
user's next spec change is put in force again. A spec Kafka refuses, a replication factor above the
brokers and a second resource naming a held topic give Ready=False with the reason. What the fleet
creates on its own is labelled so and owned by the KafkaCluster: deleting the KafkaCluster deletes
it (the garbage collector, past the admission policies) while the brokers keep its partitions on
disk (their volumes are kept), and a user's KafkaTopic stays.

    pytest -m kube tests/e2e/test_kafkatopic_spec.py
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.metadata import kube_objects as ko
from tests.e2e.test_alter_configs import SET, in_force, incremental
from flotilla.testenv import kafka_wire
from tests.support.clients import family
from flotilla.testenv.brokers.cluster import BrokerCluster, apply_crds
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.timeout(240),
    pytest.mark.flotilla_only("KafkaTopic resources of a Flotilla fleet"),
]

MANAGER = "argocd-controller"  # as a GitOps tool names itself


@pytest.fixture
def owned_fleet(tmp_path, kube_env, kube_namespace):
    """A 2-broker fleet whose brokers know their KafkaCluster's uid (as the operator sets it); the
    KafkaCluster is only an object here (no operator runs)."""
    apply_crds(kube_env)
    cluster = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
               "metadata": {"name": "fleet", "namespace": kube_namespace}, "spec": {"replicas": 2}}
    kube_env.kubectl("apply", "-f", "-", input=json.dumps(cluster))
    uid = get(kube_env, kube_namespace, "kafkacluster", "fleet")["metadata"]["uid"]
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=2, overrides={"flotilla.cluster.uid": uid}) as c:
        c.uid = uid
        yield c


def get(kube_env, ns: str, kind: str, name: str) -> dict | None:
    out = kube_env.kubectl("get", kind, name, "-n", ns, "-o", "json", "--show-managed-fields", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def apply(kube_env, ns: str, manifest: dict) -> None:
    kube_env.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-n", ns, "-f", "-",
                     input=json.dumps(manifest))


def topic_manifest(name: str, spec: dict) -> dict:
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
            "metadata": {"name": name, "labels": {ko.CLUSTER_LABEL: "fleet"}}, "spec": spec}


def ready(kube_env, ns: str, name: str, status: str = "True", reason: str | None = None):
    """The object once its Ready condition has `status` (and `reason`), for wait_for."""
    obj = get(kube_env, ns, "kafkatopic", name)
    cond = next((c for c in ((obj or {}).get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), {})
    if cond.get("status") == status and (reason is None or cond.get("reason") == reason):
        return obj
    return None


def spec_managers(obj: dict) -> set[str]:
    """Field managers that own any field under spec."""
    return {m["manager"] for m in obj["metadata"].get("managedFields") or ()
            if "f:spec" in (m.get("fieldsV1") or {})}


def test_spec_is_the_users_and_kafka_changes_show_in_status(owned_fleet, kube_env, kube_namespace):
    ns = kube_namespace
    manifest = topic_manifest("clicks", {"partitions": 2, "config": {"retention.ms": 86400000}})
    apply(kube_env, ns, manifest)
    obj = wait_for("clicks Ready", lambda: ready(kube_env, ns, "clicks"), timeout=30)
    # Spec and labels as applied: the integer stays an integer, nothing is added; only the user's
    # manager owns spec (the brokers' writes went to /status).
    assert obj["spec"] == manifest["spec"]
    assert obj["metadata"]["labels"] == manifest["metadata"]["labels"]
    assert spec_managers(obj) == {MANAGER}
    st = obj["status"]
    assert (st["topicName"], st["partitions"], st["replicationFactor"], st["observedGeneration"]) == ("clicks", 2, 1, 1)
    assert st["config"] == {"retention.ms": "86400000"}
    assert (st["underReplicatedPartitions"], st["offlinePartitions"]) == (0, 0)
    assert "ownerReferences" not in obj["metadata"]  # a user's resource: not deleted with the cluster
    # Applied again unchanged (a GitOps sync): no change at all.
    before = get(kube_env, ns, "kafkatopic", "clicks")["metadata"]["resourceVersion"]
    apply(kube_env, ns, manifest)
    assert get(kube_env, ns, "kafkatopic", "clicks")["metadata"]["resourceVersion"] == before

    # Changes through Kafka's APIs: in force and in status, never in spec.
    family("confluent").create_partitions(owned_fleet.bootstrap, "clicks", 4)
    with kafka_wire.connect(owned_fleet.brokers[1].bootstrap) as conn:
        assert incremental(conn, "clicks", ("retention.ms", SET, "3600000")) == (0, None)
    obj = wait_for("status shows Kafka's changes", lambda: (lambda o: o if o["status"].get("partitions") == 4 and (
        o["status"].get("config") or {}).get("retention.ms") == "3600000" else None)(
        get(kube_env, ns, "kafkatopic", "clicks")), timeout=30)
    assert obj["spec"] == manifest["spec"] and spec_managers(obj) == {MANAGER}
    owned_fleet.wait_leaders("clicks", 4)
    row = kube_env.kubectl("get", "kafkatopics", "clicks", "-n", ns, "--no-headers").stdout.split()
    assert row[:9] == ["clicks", "fleet", "clicks", "4", "1", "0", "0", "True", "Assigned"]

    # The user's next spec change wins again, on every broker.
    manifest["spec"]["config"]["retention.ms"] = 7200000
    apply(kube_env, ns, manifest)
    for b in owned_fleet.brokers:
        with kafka_wire.connect(b.bootstrap) as conn:
            wait_for(f"broker {b.node_id}: the spec's retention.ms in force",
                     lambda: in_force(conn, "clicks")["retention.ms"][0] == "7200000", timeout=30)
    obj = wait_for("status reflects generation 2", lambda: (lambda o: o if o["status"].get("observedGeneration") == 2
                                                               else None)(get(kube_env, ns, "kafkatopic", "clicks")),
                   timeout=30)
    assert obj["status"]["config"] == {"retention.ms": "7200000"} and obj["status"]["partitions"] == 4
    assert obj["spec"] == manifest["spec"]


def test_refused_specs_conflicts_and_what_the_fleet_owns(owned_fleet, kube_env, kube_namespace):
    ns = kube_namespace
    apply(kube_env, ns, topic_manifest("badcfg", {"config": {"no.such.key": 1}}))
    apply(kube_env, ns, topic_manifest("wide", {"replicas": 3}))
    apply(kube_env, ns, topic_manifest("orders-a", {"topicName": "orders"}))
    wait_for("orders-a Ready", lambda: ready(kube_env, ns, "orders-a"), timeout=30)
    apply(kube_env, ns, topic_manifest("orders-b", {"topicName": "orders"}))

    bad = wait_for("badcfg InvalidConfig", lambda: ready(kube_env, ns, "badcfg", "False", "InvalidConfig"), timeout=30)
    assert "no.such.key" in bad["status"]["conditions"][0]["message"]
    wide = wait_for("wide InvalidReplicationFactor",
                    lambda: ready(kube_env, ns, "wide", "False", "InvalidReplicationFactor"), timeout=30)
    assert "replication factor 3 is larger than the 2 available brokers" in wide["status"]["conditions"][0]["message"]
    dup = wait_for("orders-b ResourceConflict", lambda: ready(kube_env, ns, "orders-b", "False", "ResourceConflict"),
                   timeout=30)
    assert "orders-a" in dup["status"]["conditions"][0]["message"]
    assert "orders" in family("confluent").list_topics(owned_fleet.bootstrap)
    # Neither refused topic was created: no id, no partitions anywhere.
    for refused in (bad, wide):
        assert "topicId" not in refused["status"] and "assignment" not in refused["status"]
    assert not [d for b in owned_fleet.brokers for d in Path(b.log_dirs).glob("*") if d.name.startswith(("badcfg-", "wide-"))]

    # A topic a Kafka client created: the fleet's KafkaTopic, labelled so and owned by the cluster.
    with kafka_wire.connect(owned_fleet.brokers[0].bootstrap) as conn:
        assert int(conn.create_topic("auto-made", 2)) == 0
    owned_fleet.wait_leaders("auto-made", 2)
    name = ko.topic_object_name("fleet", "auto-made")
    made = wait_for("auto-made Ready", lambda: ready(kube_env, ns, name), timeout=30)
    assert made["metadata"]["labels"] == {ko.CLUSTER_LABEL: "fleet", ko.CREATED_BY_LABEL: ko.CREATED_BY_FLEET}
    owner = [{"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "name": "fleet", "uid": owned_fleet.uid}]
    assert made["metadata"]["ownerReferences"] == owner
    leases = json.loads(kube_env.kubectl("get", "leases", "-n", ns, "-l", f"{ko.CLUSTER_LABEL}=fleet",
                                         "-o", "json").stdout)["items"]
    assert leases and all(lease["metadata"].get("ownerReferences") == owner for lease in leases)
    directories = [Path(b.log_dirs) / f"auto-made-{p}" for b in owned_fleet.brokers for p in range(2)
                   if (Path(b.log_dirs) / f"auto-made-{p}").exists()]
    assert directories

    # Deleting the KafkaCluster deletes what the fleet created; the brokers keep the partitions.
    kube_env.kubectl("delete", "kafkacluster", "fleet", "-n", ns)
    # (The garbage collector learns new resource types from discovery every 30 s: a fresh CRD may wait that long.)
    wait_for("the fleet's KafkaTopic garbage-collected", lambda: get(kube_env, ns, "kafkatopic", name) is None,
             timeout=90)
    # Each broker either saw the topic's deletion as the cluster's, or stopped first (the garbage
    # collector deleted its Lease too: a broker whose registration is gone stops).
    wait_for("every broker saw the cluster go or stopped", lambda: all(
        "deleted with KafkaCluster fleet" in b.log_text() or not b.is_running() for b in owned_fleet.brokers),
        timeout=60)
    assert all(d.exists() for d in directories)
    assert get(kube_env, ns, "kafkatopic", "orders-a") is not None  # a user's resource stays
