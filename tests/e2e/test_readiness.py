"""/readyz of real broker processes (two brokers, metadata on the test API server): ready once
registered and in the ISR of every partition the broker holds, each with a leader; 503 naming how
many partitions are behind otherwise. The operator's StatefulSet probes it, so a rolling update
waits for a restarted broker to be back in every ISR. (That a roll does wait is shown only on real
pods, tests/e2e/test_operator_pods.py: kwok's pods are Ready because kwok says so, no probe runs.)

Replication itself (followers fetching, the leader shrinking and expanding the ISR) is not what
this tests: the assignment the broker reads is the KafkaTopic's status, written here by hand, as
the brokers' own compare-and-swap writes it.

    .venv/bin/pytest -m kube tests/e2e/test_readiness.py
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from broker.metadata import kube_objects as ko
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]


@pytest.fixture
def fleet(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=2) as c:
        yield c


def readyz(broker) -> tuple[int, str]:
    url = f"http://127.0.0.1:{broker.metrics_port}/readyz"
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def healthz(broker) -> int:
    with urllib.request.urlopen(broker.healthz_url, timeout=5) as resp:
        return resp.status


def topic_object(kube_env, ns: str, cluster: str, topic: str) -> dict:
    name = ko.topic_object_name(cluster, topic)
    return json.loads(kube_env.kubectl("get", "kafkatopic", name, "-n", ns, "-o", "json").stdout)


def write_assignment(kube_env, ns: str, obj: dict, assignment: list[dict]) -> None:
    """Replace status.assignment in one compare-and-swap on resourceVersion, through the status
    subresource (as brokers write it)."""
    obj = json.loads(json.dumps(obj))
    obj["status"]["assignment"] = assignment
    kube_env.kubectl("replace", "--subresource=status", "-n", ns, "-f", "-", input=json.dumps(obj))


def test_readyz_follows_the_isr_of_the_partitions_a_broker_holds(fleet, kube_env, kube_namespace):
    one, two = fleet.broker(1), fleet.broker(2)
    with kafka_wire.connect(one.bootstrap) as conn:
        assert int(conn.create_topic("orders", 4)) == 0
    fleet.wait_leaders("orders", 4)
    # Replication factor 1: each broker is the whole ISR of its partitions, which have a leader.
    for b in (one, two):
        status, text = wait_for(f"broker {b.node_id} ready", lambda b=b: (lambda r: r if r[0] == 200 else None)(readyz(b)),
                                timeout=30)
        assert text.startswith("ok: in the ISR of all ")

    # Broker 1 becomes a second replica of a partition whose only in-sync replica is a broker that
    # is not there (node 9): the controller can elect no leader (unclean election is off), so the
    # partition stays offline and broker 1 is not ready, naming it; broker 2 still is, and
    # liveness is not affected (a broker waiting for its partitions must not be restarted).
    # (Out of the ISR with a live leader is the same rule, unit-tested in
    # tests/unit/broker/test_readiness.py; written by hand here it would race the leader's own
    # ISR expansion once followers replicate.)
    obj = topic_object(kube_env, kube_namespace, fleet.name, "orders")
    original = obj["status"]["assignment"]
    index = next(i for i, p in enumerate(original) if p["leader"] == 2)
    orphaned = [dict(p) for p in original]
    orphaned[index] = {"leader": 9, "leaderEpoch": original[index]["leaderEpoch"] + 1, "replicas": [9, 1], "isr": [9]}
    write_assignment(kube_env, kube_namespace, obj, orphaned)
    # (First "not in the ISR" of it, as written; "no leader" once the controller has seen it.)
    answers: list[tuple[int, str]] = []
    wait_for("broker 1 waits for a leader", lambda: answers.append(readyz(one)) or "no leader" in answers[-1][1],
             timeout=30)
    assert all(code == 503 for code, _ in answers[answers.index(next(a for a in answers if a[0] == 503)):]), answers
    held = sum(1 for p in original if 1 in p["replicas"]) + 1
    assert answers[-1] == (503, f"1 of {held} partition(s) behind: no leader for 1 (orders-{index})\n"), answers[-1]
    assert readyz(two)[0] == 200
    assert healthz(one) == 200

    # The partition back where it was: broker 1 holds only what it leads and is ready again.
    obj = topic_object(kube_env, kube_namespace, fleet.name, "orders")
    restored = [dict(p) for p in obj["status"]["assignment"]]
    restored[index] = {**original[index], "leaderEpoch": obj["status"]["assignment"][index]["leaderEpoch"] + 1}
    write_assignment(kube_env, kube_namespace, obj, restored)
    wait_for("broker 1 ready again", lambda: readyz(one)[0] == 200, timeout=30)
    assert readyz(two)[0] == 200

    # A restarted broker is ready again once it is registered and its partitions have leaders.
    two.stop()
    two.start()
    wait_for("broker 2 ready after a restart", lambda: readyz(two)[0] == 200, timeout=60)
