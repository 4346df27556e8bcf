"""A fenced broker that still fetches is not added back to the ISR, and the ISR does not flap
(issue 18 item 6), on three broker processes.

One broker is cut off the API server (tests/support/api_cut.py) while its Kafka connections stay
up: its Lease lapses, the others fence it and the controller takes it out of every ISR, yet it
keeps its last view and its replica fetchers keep fetching from the leaders, caught up. Before
the fix a leader added it back at its next fetch, the controller removed it again, and so on: a
write of the KafkaTopic per round for as long as the broker stayed fenced. Now a broker whose
registration is not live is never added (the leader refuses its fetches as a follower's,
follower_identity, and does not propose it, ReplicaManager.follower_fetched and
isr_updates.recompute), so while it fetches on, nothing writes the KafkaTopic. Back on the API
server it renews its Lease and rejoins the ISR of every partition.

    pytest -m kube tests/e2e/test_isr_fenced_follower.py
"""

from __future__ import annotations

import json
import re

import pytest

from broker.metadata import kube_objects as ko
from tests.e2e.test_replication import OVERRIDES, create_topic, metric, scrape, wait_isr
from tests.support.api_cut import ApiCut
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.timeout(300),
    pytest.mark.flotilla_only("Leases and ISR writes of a Flotilla fleet"),
]

PARTITIONS = 3
FETCHES = 50  # fetch round trips the fenced broker makes to each leader while the ISR is watched


@pytest.fixture
def fleet(tmp_path, kube_env, kube_namespace):
    """Three brokers, each reaching the API server through its own ApiCut."""
    cluster = BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES)
    cuts = {}
    try:
        for b in cluster.brokers:
            cuts[b.node_id] = ApiCut(kube_env.kubeconfig, tmp_path / f"api-{b.node_id}")
            b.kubeconfig = cuts[b.node_id].kubeconfig
        with cluster as c:
            yield c, cuts
    finally:
        for cut in cuts.values():
            cut.close()


def kafkatopic(kube_env, ns: str, name: str) -> dict:
    return json.loads(kube_env.kubectl("get", "kafkatopic", name, "-n", ns, "-o", "json").stdout)


def replica_fetches(broker) -> dict[int, float]:
    """Leader id -> fetch round trips `broker`'s replica fetchers made to it."""
    return {int(m[1]): float(m[2]) for m in re.finditer(
        r'^flotilla_replica_fetches_total\{leader="(\d+)"\} (\S+)$', scrape(broker), re.M)}


def test_a_fenced_broker_that_still_fetches_is_not_added_back_and_the_isr_does_not_flap(
        fleet, kube_env, kube_namespace):
    cluster, cuts = fleet
    ns = kube_namespace
    controller = cluster.controller_id()
    victim = next(b for b in cluster.brokers if b.node_id != controller)
    others = sorted(b.node_id for b in cluster.brokers if b is not victim)
    topic = create_topic(cluster.broker(controller), PARTITIONS, rf=3)
    wait_isr(cluster, topic, PARTITIONS, {1, 2, 3})
    name = ko.topic_object_name(cluster.name, topic)

    cuts[victim.node_id].cut()

    def fenced():
        """The others list only each other, and the controller took the victim out of every ISR."""
        views = [sorted(int(x.node_id) for x in cluster.metadata(cluster.broker(n), []).brokers) for n in others]
        obj = kafkatopic(kube_env, ns, name)
        states = [(p["leader"], p["isr"]) for p in obj["status"]["assignment"]]
        ok = all(v == others for v in views) and all(
            leader in others and sorted(isr) == others for leader, isr in states)
        return obj if ok else None
    obj = wait_for(f"broker {victim.node_id} fenced and out of every ISR of {topic}", fenced, timeout=60)

    # Watched from here: the victim fetches on (its view is the last it had), nothing else changes.
    version = obj["metadata"]["resourceVersion"]
    expands = {n: metric(cluster.broker(n), "flotilla_isr_expands_total") for n in others}
    start = replica_fetches(victim)
    followed = sorted(n for n in start if n in others)
    assert followed, f"broker {victim.node_id} follows no live leader: {start}"

    def fetched_on():
        isrs = [p["isr"] for p in kafkatopic(kube_env, ns, name)["status"]["assignment"]]
        assert not any(victim.node_id in isr for isr in isrs), (
            f"broker {victim.node_id}, fenced, was added back to the ISR: {isrs}")
        now = replica_fetches(victim)
        return now if all(now.get(n, 0) >= start[n] + FETCHES for n in followed) else None
    wait_for(f"broker {victim.node_id} (fenced) fetching {FETCHES} more times from leaders {followed}",
             fetched_on, timeout=120)

    after = kafkatopic(kube_env, ns, name)
    assert after["metadata"]["resourceVersion"] == version, (
        f"the KafkaTopic was written while broker {victim.node_id} was fenced: "
        f"{obj['status']['assignment']} -> {after['status']['assignment']}")
    assert {n: metric(cluster.broker(n), "flotilla_isr_expands_total") for n in others} == expands

    # Back on the API server it renews its Lease, is live again and rejoins every ISR (written by
    # the leaders as expansions: the counters above could move).
    # Read from the KafkaTopic, not Metadata: the victim's own Metadata still shows the ISR it had
    # before it was cut off, so Metadata through it passed at once (the CI run of 3dbbc0a).
    cuts[victim.node_id].restore()
    wait_for(f"broker {victim.node_id} back in every ISR of {topic} (the KafkaTopic)",
             lambda: [sorted(p["isr"]) for p in kafkatopic(kube_env, ns, name)["status"]["assignment"]],
             until=lambda isrs: len(isrs) == PARTITIONS and all(isr == [1, 2, 3] for isr in isrs), timeout=90)
    assert victim.is_running(), victim.log_tail()
    # A leader counts its expansion once its write is answered, which can come just after the watch
    # event that shows the new ISR: wait for the count.
    wait_for("the leaders counting the expansions", lambda: {
        n: metric(cluster.broker(n), "flotilla_isr_expands_total") for n in others},
        until=lambda now: sum(now.values()) > sum(expands.values()), timeout=30)
