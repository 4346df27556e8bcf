"""The RecordDeletion resource end to end: the operator (kopf, in-process) against the test API
server and a fleet of three brokers (RF=3 topics) deletes records with DeleteRecords through
confluent-kafka's AdminClient. The offset and timestamp policies delete exactly what they name;
consumedBy deletes only what every named group committed (a partition one never committed is left
alone; a group that does not exist is a GroupNotFound condition and nothing is deleted); runs
repeated on an interval delete nothing more; bad specs get a condition naming the field; deleting
the resource stops its schedule.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_record_deletion.py
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone

import pytest
from kio.schema.errors import ErrorCode

from tests.support.kopf_operator import in_process_operator
from tests.e2e.test_operator import apply, condition, free_port, get_json
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from tests.support.outside_cluster import stand_in_cluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.flotilla_only("the operator drives a Flotilla fleet"),
              pytest.mark.timeout(300)]

T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the first record's CreateTime in the timestamp test


@pytest.fixture(scope="module")
def namespace(kube_env):
    name = f"rdel-{uuid.uuid4().hex[:8]}"
    kube_env.kubectl("create", "namespace", name)
    yield name
    kube_env.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False, timeout=30)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, kube_env, namespace):
    with BrokerCluster(tmp_path_factory.mktemp("rdel-fleet"), kube_env, namespace, size=3) as c:
        # The brokers are processes on this host: the KafkaCluster "fleet" names their address.
        apply(kube_env, stand_in_cluster("fleet", namespace, c.bootstrap))
        yield c


@pytest.fixture(scope="module")
def metrics_url():
    return f"http://127.0.0.1:{free_port()}/metrics"


@pytest.fixture(scope="module")
def operator(kube_env, fleet, metrics_url):
    with in_process_operator({"KUBECONFIG": str(kube_env.kubeconfig),
                              "FLOTILLA_OPERATOR_METRICS_ADDRESS": metrics_url.removeprefix("http://").removesuffix("/metrics"),
                              "FLOTILLA_OPERATOR_LIVENESS_ADDRESS": "off"}) as runner:
        yield runner


def make_topic(fleet, prefix: str, partitions: int = 2) -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(fleet.brokers[0].bootstrap) as conn:
        assert conn.create_topic(topic, partitions, replication_factor=3) == ErrorCode.none
    fleet.wait_leaders(topic, partitions)
    return topic


def produce(fleet, topic: str, partition: int, count: int, first_ts_ms: int | None = None) -> None:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": fleet.bootstrap, "acks": "all", "linger.ms": 0})
    for i in range(count):
        kw = {} if first_ts_ms is None else {"timestamp": first_ts_ms + 1000 * i}
        p.produce(topic, value=f"r{i}".encode(), partition=partition, **kw)
    assert p.flush(30) == 0


def commit(fleet, group: str, topic: str, offsets: dict[int, int]) -> None:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": fleet.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def watermarks(fleet, topic: str, partition: int) -> tuple[int, int]:
    """(log start, high watermark) as the partition's leader answers ListOffsets."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": fleet.bootstrap, "group.id": "rdel-watermarks"})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=15)
    finally:
        c.close()


def resource_metric(url: str, metric_name: str, ns: str, name: str) -> float | None:
    """One RecordDeletion's sample (labels namespace and name) from the operator's /metrics."""
    import re
    import urllib.request

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    for line in text.splitlines():
        m = re.match(r"^(\w+)\{([^}]*)\} (\S+)$", line)
        if m and m.group(1) == metric_name and dict(re.findall(r'(\w+)="([^"]*)"', m.group(2))) == {"namespace": ns, "name": name}:
            return float(m.group(3))
    return None


def deletion(name: str, ns: str, topic: str, before: dict, **spec) -> dict:
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterRef": {"name": "fleet"}, "topic": topic, "before": before, **spec}}


def status_of(kube_env, ns: str, name: str, reason: str, check=None):
    """The object once its Ready reason is `reason` for its current generation (and check(obj) holds)."""
    def current():
        obj = get_json(kube_env, "recorddeletion", name, "-n", ns, check=False)
        ready = condition(obj, "Ready")
        if ready.get("reason") != reason or ready.get("observedGeneration") != obj["metadata"]["generation"]:
            return None
        if check is not None and not check(obj):
            return None
        return obj
    return wait_for(f"recorddeletion {name}: {reason}", current, timeout=90)


def rows(obj) -> dict[int, dict]:
    return {r["partition"]: r for r in obj["status"].get("partitions") or ()}


def test_offset_policy_deletes_exactly_what_it_names_and_repeated_runs_delete_nothing_more(
        kube_env, namespace, fleet, operator, metrics_url):
    ns = namespace
    topic = make_topic(fleet, "rdoff")
    for p in (0, 1):
        produce(fleet, topic, p, 30)
    apply(kube_env, deletion("off", ns, topic, {"offset": 10}, partitions=[0]))
    got = status_of(kube_env, ns, "off", "Deleted")
    assert watermarks(fleet, topic, 0) == (10, 30)
    assert watermarks(fleet, topic, 1) == (0, 30)  # not chosen: untouched
    assert rows(got) == {0: {"partition": 0, "lowWatermark": 10, "recordsDeleted": 10}}
    assert got["status"]["recordsDeleted"] == 10 and got["status"]["policy"] == "offset 10"
    assert "nextRunTime" not in got["status"] and got["status"]["lastRunTime"]
    wait_for("records-deleted metric", lambda: resource_metric(metrics_url, "flotilla_operator_records_deleted_total",
                                                               ns, "off"), until=lambda v: v == 10)
    assert resource_metric(metrics_url, "flotilla_operator_record_deletion_last_success_timestamp_seconds", ns, "off") > 0
    table = kube_env.kubectl("get", "recorddeletion", "off", "-n", ns).stdout
    assert "POLICY" in table and "offset 10" in table and "DELETED" in table

    # Now every second, over both partitions: partition 1 loses its first 10 once, partition 0
    # nothing more, and later runs delete nothing at all.
    apply(kube_env, deletion("off", ns, topic, {"offset": 10}, interval="1s"))
    first = status_of(kube_env, ns, "off", "Deleted", lambda o: rows(o).get(1, {}).get("lowWatermark") == 10)
    later = status_of(kube_env, ns, "off", "Deleted",
                      lambda o: o["status"]["lastRunTime"] != first["status"]["lastRunTime"])
    assert later["status"]["recordsDeleted"] == 20
    assert rows(later) == {0: {"partition": 0, "lowWatermark": 10, "recordsDeleted": 0},
                           1: {"partition": 1, "lowWatermark": 10, "recordsDeleted": 0}}
    assert "nothing to delete" in condition(later, "Ready")["message"] and later["status"]["nextRunTime"]
    assert watermarks(fleet, topic, 0) == (10, 30) and watermarks(fleet, topic, 1) == (10, 30)
    kube_env.kubectl("delete", "recorddeletion", "off", "-n", ns, "--wait=true", "--timeout=60s")
    # A deleted resource leaves no series behind.
    wait_for("series of the deleted resource gone", lambda: resource_metric(
        metrics_url, "flotilla_operator_records_deleted_total", ns, "off"), until=lambda v: v is None)


def test_timestamp_policy_deletes_the_records_older_than_the_time(kube_env, namespace, fleet, operator):
    ns = namespace
    topic = make_topic(fleet, "rdts", partitions=1)
    produce(fleet, topic, 0, 12, first_ts_ms=T0_MS)  # record i has CreateTime T0 + i seconds
    when = datetime.fromtimestamp((T0_MS + 5000) / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    apply(kube_env, deletion("ts", ns, topic, {"timestamp": when}))
    got = status_of(kube_env, ns, "ts", "Deleted")
    assert watermarks(fleet, topic, 0) == (5, 12)  # records 0-4 are older than T0+5s, record 5 is not
    assert rows(got)[0]["recordsDeleted"] == 5
    kube_env.kubectl("delete", "recorddeletion", "ts", "-n", ns, "--wait=true", "--timeout=60s")


def test_consumed_by_deletes_only_what_every_group_committed(kube_env, namespace, fleet, operator):
    ns = namespace
    topic = make_topic(fleet, "rdcons")
    for p in (0, 1):
        produce(fleet, topic, p, 20)
    commit(fleet, "rd-etl", topic, {0: 12})  # never commits partition 1
    commit(fleet, "rd-audit", topic, {0: 8, 1: 15})

    # A group that does not exist: named, and nothing deleted (never "everything").
    apply(kube_env, deletion("cons", ns, topic, {"consumedBy": ["rd-etl", "rd-ghost"]}))
    bad = status_of(kube_env, ns, "cons", "GroupNotFound")
    assert "spec.before.consumedBy" in condition(bad, "Ready")["message"] and "rd-ghost" in condition(bad, "Ready")["message"]
    assert watermarks(fleet, topic, 0) == (0, 20) and watermarks(fleet, topic, 1) == (0, 20)

    apply(kube_env, deletion("cons", ns, topic, {"consumedBy": ["rd-etl", "rd-audit"]}, keep={"records": 2}))
    got = status_of(kube_env, ns, "cons", "Deleted")
    assert watermarks(fleet, topic, 0) == (6, 20)  # least commit 8, keeping 2
    assert watermarks(fleet, topic, 1) == (0, 20)  # rd-etl never committed partition 1
    assert rows(got)[1]["recordsDeleted"] == 0 and "rd-etl" in rows(got)[1]["error"]
    assert "left alone" in condition(got, "Ready")["message"]
    kube_env.kubectl("delete", "recorddeletion", "cons", "-n", ns, "--wait=true", "--timeout=60s")


def test_bad_specs_get_a_condition_naming_the_field(kube_env, namespace, fleet, operator):
    ns = namespace
    topic = make_topic(fleet, "rdbad")
    cases = [
        ("bad-topic", deletion("bad-topic", ns, "rd-no-such-topic", {"offset": 1}), "TopicNotFound", "spec.topic"),
        ("bad-part", deletion("bad-part", ns, topic, {"offset": 1}, partitions=[0, 7]), "PartitionNotFound", "spec.partitions"),
        ("bad-interval", deletion("bad-interval", ns, topic, {"offset": 1}, interval="100ms"), "InvalidSpec", "spec.interval"),
    ]
    for name, obj, _, _ in cases:
        apply(kube_env, obj)
    for name, _, reason, field in cases:
        got = status_of(kube_env, ns, name, reason)
        assert field in condition(got, "Ready")["message"] and condition(got, "Ready")["status"] == "False"
    assert watermarks(fleet, topic, 0) == (0, 0)
    for name, *_ in cases:
        kube_env.kubectl("delete", "recorddeletion", name, "-n", ns, "--wait=true", "--timeout=60s")


def test_deleting_the_resource_stops_its_schedule(kube_env, namespace, fleet, operator):
    ns = namespace
    topic, other = make_topic(fleet, "rdstop", partitions=1), make_topic(fleet, "rdside", partitions=1)
    produce(fleet, topic, 0, 20)
    commit(fleet, "rd-stop", topic, {0: 5})
    apply(kube_env, deletion("stop", ns, topic, {"consumedBy": ["rd-stop"]}, interval="1s"))
    running = status_of(kube_env, ns, "stop", "Deleted", lambda o: rows(o).get(0, {}).get("lowWatermark") == 5)
    # No finalizer: a namespace deletion never waits for the operator.
    assert not running["metadata"].get("finalizers"), running["metadata"]
    kube_env.kubectl("delete", "recorddeletion", "stop", "-n", ns, "--wait=true", "--timeout=60s")
    commit(fleet, "rd-stop", topic, {0: 15})
    # Another resource on the same schedule runs three times: the deleted one would have run too.
    apply(kube_env, deletion("side", ns, other, {"offset": 0}, interval="1s"))
    seen: set[str] = set()

    def side_runs():
        obj = get_json(kube_env, "recorddeletion", "side", "-n", ns, check=False)
        if obj and obj.get("status", {}).get("lastRunTime"):
            seen.add(obj["status"]["lastRunTime"])
        return sorted(seen)
    wait_for("three runs of the side resource", side_runs, until=lambda runs: len(runs) >= 3, timeout=60)
    assert watermarks(fleet, topic, 0) == (5, 20)
    kube_env.kubectl("delete", "recorddeletion", "side", "-n", ns, "--wait=true", "--timeout=60s")
