"""Where a fleet puts leaders and replicas, through the controller's own loops (three broker
processes on Kubernetes metadata):

- auto.leader.rebalance.enable: after a broker comes back and rejoins the ISR, the controller's
  rebalance loop (every leader.imbalance.check.interval.seconds) hands each partition back to its
  preferred replica (the first of its replicas) without anyone calling ElectLeaders;
- broker.rack: brokers register their rack (Metadata lists it) and new topics get rack-aware
  assignments, each partition's replicas in as many racks as its replication factor allows.

    pytest -m kube tests/e2e/test_fleet_placement.py
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.e2e.test_replication import OVERRIDES, create_topic, partition_states, wait_isr
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("placement on a Flotilla cluster on Kubernetes metadata"),
]

RACKS = {1: "zone-a", 2: "zone-b", 3: "zone-a"}


@pytest.fixture
def rebalancing(tmp_path, kube_env, kube_namespace):
    overrides = {**OVERRIDES, "auto.leader.rebalance.enable": "true", "leader.imbalance.check.interval.seconds": "1"}
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=overrides) as c:
        yield c


@pytest.fixture
def racked(tmp_path, kube_env, kube_namespace):
    c = BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES)
    for b in c.brokers:
        b.overrides["broker.rack"] = RACKS[b.node_id]
    with c:
        yield c


@pytest.mark.timeout(300)
def test_rebalance_loop_gives_leadership_back_to_the_preferred_replica(rebalancing):
    cluster = rebalancing
    topic = create_topic(cluster.brokers[0], 3)
    cluster.wait_leaders(topic, 3)
    wait_isr(cluster, topic, 3, {1, 2, 3})
    states = partition_states(cluster, topic)
    preferred = {p: s[2][0] for p, s in states.items()}
    assert {p: s[0] for p, s in states.items()} == preferred, states
    assert sorted(preferred.values()) == [1, 2, 3], states  # each broker prefers one partition

    gone = cluster.broker(preferred[0])
    gone.kill9()
    others = [b for b in cluster.brokers if b is not gone]
    wait_for(f"partition 0 led by another broker than {gone.node_id}",
             lambda: partition_states(cluster, topic, others[0])[0][0],
             until=lambda leader: leader in {b.node_id for b in others}, timeout=60)
    gone.start()
    cluster.wait_formed(timeout=90)
    wait_isr(cluster, topic, 3, {1, 2, 3}, timeout=60)
    # Nobody asks for an election: the controller's loop moves partition 0 back.
    wait_for("every partition led by its preferred replica again",
             lambda: {p: s[0] for p, s in partition_states(cluster, topic).items()},
             until=lambda leaders: leaders == preferred, timeout=60)


@pytest.mark.timeout(240)
def test_replicas_of_a_partition_are_spread_over_racks(racked):
    cluster = racked
    md = cluster.metadata(cluster.brokers[0], [])
    assert {int(b.node_id): b.rack for b in md.brokers} == RACKS
    topic = create_topic(cluster.brokers[0], 6, rf=2, prefix="racks")
    cluster.wait_leaders(topic, 6)
    states = partition_states(cluster, topic)
    spread = {p: sorted(RACKS[r] for r in s[2]) for p, s in states.items()}
    # Two racks, two replicas: every partition has one in each (rack-blind round robin puts
    # brokers 1 and 3, both zone-a, together on some partitions).
    assert set(map(tuple, spread.values())) == {("zone-a", "zone-b")}, states
    # Leadership is still spread over every broker.
    assert set(Counter(s[0] for s in states.values())) == {1, 2, 3}, states
