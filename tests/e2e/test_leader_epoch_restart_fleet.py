"""A fleet broker started again leads under new leader epochs, as a restarted Kafka broker does
(issue 18), also when it is back before the controller moved its leaderships (inside a Lease).

Three broker processes on the test API server; flotilla only (tests/e2e/test_leader_epoch_restart.py
checks the same on one broker against Apache Kafka too).
"""

from __future__ import annotations

import pytest

from tests.e2e.test_cluster import create_topic
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("a Flotilla cluster on Kubernetes metadata"),
]


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3) as c:
        yield c


def states(cluster: BrokerCluster, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (leader, leader epoch) from Metadata."""
    md = cluster.metadata(cluster.running()[0], [topic])
    return {int(p.partition_index): (int(p.leader_id), int(p.leader_epoch)) for p in md.topics[0].partitions}


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["kill9-follower-of-the-controller", "restart-the-controller"])
def test_a_restarted_broker_leads_under_new_epochs(cluster, how):
    topic = create_topic(cluster.brokers[0], 6)
    cluster.wait_leaders(topic, 6)
    controller = cluster.controller_id()
    before = states(cluster, topic)
    victim = next(b for b in cluster.brokers if (b.node_id == controller) == how.endswith("controller")
                  and any(leader == b.node_id for leader, _ in before.values()))
    led = [p for p, (leader, _) in before.items() if leader == victim.node_id]

    if how.startswith("kill9"):
        victim.kill9()
        victim.start()  # waits for its old Lease to expire, then takes it over
    else:
        # A clean restart of the controller: the next controller keeps the leaderships of brokers
        # that look gone for one Lease duration (its grace), and this one is back within it.
        victim.restart()
    cluster.wait_formed()
    after = wait_for("every partition led again", lambda: (s := states(cluster, topic))
                     and all(leader >= 0 for leader, _ in s.values()) and s, timeout=60)
    assert all(after[p][1] > before[p][1] for p in led), (led, before, after)
