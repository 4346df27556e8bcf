"""Three broker processes form one Kafka cluster with their metadata in a real kube-apiserver + etcd
(issue 9): the same brokers and controller from every broker, partitions spread over all three,
every client family producing and consuming across them, coordinator shards, and failures
(kill -9 of the controller, restart of a coordinator's broker, a duplicate node.id, an API server
outage).

    pytest -m kube tests/e2e/test_cluster.py
"""

from __future__ import annotations

import datetime
import time

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster, ClusterBroker
from tests.support.clients import family, keyed_records, new_group
from flotilla.testenv.brokers.broker_process import BrokerStartError, free_port
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("a Flotilla cluster on Kubernetes metadata"),
]

LEASE_S = 6.0
CAMPAIGN_S = 2.0  # Controller.campaign_interval_s


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3) as c:
        yield c


def create_topic(broker: ClusterBroker, partitions: int, prefix: str = "fleet") -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(broker.bootstrap) as conn:
        code = conn.create_topic(topic, partitions)
    assert int(code) == 0, f"CreateTopics {topic} through broker {broker.node_id}: {code!r}"
    return topic


def coordinator_of(bootstrap: str, group: str) -> int:
    """FindCoordinator over the wire (retrying while the offsets topic is being created)."""
    from kio.schema.find_coordinator.v3.request import FindCoordinatorRequest

    def ask():
        with kafka_wire.connect(bootstrap) as conn:
            r = conn.request(FindCoordinatorRequest(key=group, key_type=0))
        return int(r.node_id) if int(r.error_code) == 0 else None
    return wait_for(f"a coordinator for {group}", ask, timeout=30)


def produce_v11(topic: str, partition: int):
    """A Produce v11 request (the version with KIP-951's tagged fields) of one record."""
    from kio.schema.produce.v11.request import PartitionProduceData, ProduceRequest, TopicProduceData

    batch = kafka_wire.build_batch([kafka_wire.Msg(b"k", b"v")])
    return ProduceRequest(transactional_id=None, acks=1, timeout=datetime.timedelta(seconds=10), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=partition, records=batch),)),))


# ---------------------------------------------------------------------------------------------

@pytest.mark.timeout(180)
def test_every_broker_lists_the_same_three_brokers_and_controller(cluster):
    kcat = family("kcat")
    answers = set()
    for b in cluster.brokers:
        md = kcat.metadata(b.bootstrap)
        brokers = tuple(sorted((x["id"], x["name"]) for x in md["brokers"]))
        answers.add((brokers, md.get("controllerid")))
    assert len(answers) == 1, answers
    brokers, controller = answers.pop()
    assert [i for i, _ in brokers] == [1, 2, 3]
    assert {name for _, name in brokers} == {f"127.0.0.1:{b.port}" for b in cluster.brokers}
    assert controller in (1, 2, 3)
    # DescribeCluster (the Java admin client's view) names the same controller.
    desc = family("confluent").describe_cluster(cluster.brokers[1].bootstrap)
    assert desc["controller"] == controller and sorted(n[0] for n in desc["nodes"]) == [1, 2, 3]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("client_name", ["confluent", "kafka-python", "aiokafka", "java"])
def test_clients_produce_and_consume_across_all_brokers(cluster, client_name):
    client = family(client_name)
    via = cluster.brokers[2]  # created through a broker that is not necessarily the controller
    topic = create_topic(via, 12)
    leaders = cluster.wait_leaders(topic, 12)
    assert set(leaders.values()) == {1, 2, 3}, leaders
    # every broker reports the same leaders
    for b in cluster.brokers:
        assert cluster.leaders(topic, via=b) == leaders
    bootstrap = cluster.brokers[0].bootstrap
    sent = keyed_records(240, keys=60)
    client.produce(bootstrap, topic, sent)
    # a group whose coordinator is not the bootstrap broker
    group = next(g for g in (new_group() for _ in range(200))
                 if coordinator_of(bootstrap, g) != cluster.brokers[0].node_id)
    got = client.consume_and_commit(bootstrap, topic, group, len(sent))
    assert sorted((r.key, r.value) for r in got) == sorted(sent)
    assert {r.partition for r in got} == set(range(12))
    # the commit reached the coordinator: a second member of the group starts after it
    more = keyed_records(12, keys=12, prefix="after")
    client.produce(bootstrap, topic, more)
    rest = client.consume_and_commit(bootstrap, topic, group, len(more))
    assert sorted((r.key, r.value) for r in rest) == sorted(more)


@pytest.mark.timeout(240)
def test_produce_to_a_follower_broker_names_the_leader(cluster):
    """NOT_LEADER_OR_FOLLOWER (never UNKNOWN_TOPIC_OR_PARTITION) with KIP-951's CurrentLeader and
    NodeEndpoints, for Produce and Fetch."""
    from kio.schema.fetch.v16.request import FetchPartition, FetchRequest, FetchTopic

    topic = create_topic(cluster.brokers[0], 3)
    leaders = cluster.wait_leaders(topic, 3)
    p, leader = next(iter(leaders.items()))
    other = next(b for b in cluster.brokers if b.node_id != leader)
    md = cluster.metadata(other, [topic])
    epoch = int(md.topics[0].partitions[p].leader_epoch)
    topic_id = md.topics[0].topic_id
    with kafka_wire.connect(other.bootstrap) as conn:
        resp = conn.request(produce_v11(topic, p))
        part = resp.responses[0].partition_responses[0]
        assert int(part.error_code) == int(ErrorCode.not_leader_or_follower)
        assert int(part.current_leader.leader_id) == leader and int(part.current_leader.leader_epoch) == epoch
        assert [(int(n.node_id), n.port) for n in resp.node_endpoints] == [(leader, cluster.broker(leader).port)]
        fetch = conn.request(FetchRequest(
            max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=0,
            session_epoch=-1, topics=(FetchTopic(topic_id=topic_id, partitions=(FetchPartition(
                partition=p, current_leader_epoch=-1, fetch_offset=0, last_fetched_epoch=-1,
                log_start_offset=-1, partition_max_bytes=1 << 20),)),),
            forgotten_topics_data=(), rack_id=""))
        fp = fetch.responses[0].partitions[0]
        assert int(fp.error_code) == int(ErrorCode.not_leader_or_follower)
        assert int(fp.current_leader.leader_id) == leader
        assert [int(n.node_id) for n in fetch.node_endpoints] == [leader]
    with kafka_wire.connect(cluster.broker(leader).bootstrap) as conn:
        resp = conn.request(produce_v11(topic, p))
        assert int(resp.responses[0].partition_responses[0].error_code) == 0
        assert resp.node_endpoints == ()


@pytest.mark.timeout(300)
def test_committed_offsets_survive_restarting_the_coordinators_broker(cluster):
    client = family("confluent")
    bootstrap = cluster.bootstrap
    topic = create_topic(cluster.brokers[0], 6)
    cluster.wait_leaders(topic, 6)
    sent = keyed_records(60, keys=30)
    client.produce(bootstrap, topic, sent)
    group = new_group()
    coord = coordinator_of(cluster.brokers[0].bootstrap, group)
    first = client.consume_and_commit(bootstrap, topic, group, 30)
    cluster.broker(coord).restart()
    cluster.wait_formed()
    cluster.wait_leaders(topic, 6)
    assert coordinator_of(cluster.brokers[0].bootstrap, group) == coord  # its shard came back with it
    rest = client.consume_and_commit(bootstrap, topic, group, 30)
    assert sorted((r.key, r.value) for r in first + rest) == sorted(sent)


@pytest.mark.timeout(300)
def test_kill9_of_the_controller_elects_another_and_the_broker_rejoins_with_its_data(cluster):
    client = family("confluent")
    topic = create_topic(cluster.brokers[0], 6)
    leaders = cluster.wait_leaders(topic, 6)
    sent = keyed_records(60, keys=30)
    client.produce(cluster.bootstrap, topic, sent)
    controller = cluster.controller_id()
    victim = cluster.broker(controller)
    victim.kill9()
    killed_at = time.monotonic()
    survivors = [b.node_id for b in cluster.brokers if b.node_id != controller]

    def new_controller_named():
        named = {int(cluster.metadata(cluster.broker(n), []).controller_id) for n in survivors}
        return len(named) == 1 and named.pop() in survivors
    # A survivor takes the Lease over at its next campaign after expiry (the wait bounds that), and
    # never before the Lease could have expired: the dead controller renewed it at most one
    # campaign interval (2 s) before it died. (A loaded machine can only make this later.)
    wait_for("a surviving broker to become controller", new_controller_named, timeout=3 * LEASE_S, interval=0.1)
    took = time.monotonic() - killed_at
    assert took >= LEASE_S - CAMPAIGN_S, f"new controller {took:.1f}s after the kill, before the Lease expired"
    new_controller = cluster.wait_formed(timeout=3 * LEASE_S, expect=survivors)
    assert new_controller != controller
    # partitions of the dead broker go offline (RF=1; after the new controller's grace of one
    # Lease), the others keep their leaders
    def offline_as_expected():
        md = cluster.metadata(cluster.broker(new_controller), [topic])
        for p in md.topics[0].partitions:
            was = leaders[int(p.partition_index)]
            if was == controller and (int(p.leader_id) != -1
                                      or int(p.error_code) != int(ErrorCode.leader_not_available)):
                return False
            if was != controller and int(p.leader_id) != was:
                return False
        return True
    wait_for("the dead broker's partitions to go offline", offline_as_expected, timeout=3 * LEASE_S)
    # metadata written while it is gone is kept: a topic created through a survivor
    later = create_topic(cluster.broker(new_controller), 2)
    victim.start()
    cluster.wait_formed()
    assert cluster.wait_leaders(topic, 6) == leaders
    cluster.wait_leaders(later, 2)
    got = client.consume_and_commit(cluster.bootstrap, topic, new_group(), len(sent))
    assert sorted((r.key, r.value) for r in got) == sorted(sent)


def test_producer_ids_are_unique_across_the_fleet(cluster):
    """KIP-730: brokers take blocks of producer ids from the cluster metadata, so no two brokers
    hand out the same id (an idempotent producer whose id another broker also gave out would get
    OUT_OF_ORDER_SEQUENCE_NUMBER once a partition it writes moves there)."""
    by_broker = {}
    for b in cluster.brokers:
        with kafka_wire.connect(b.bootstrap) as conn:
            by_broker[b.node_id] = {conn.init_producer_id()[0] for _ in range(50)}
    assert all(len(ids) == 50 for ids in by_broker.values())
    shared = {(a, b): sorted(by_broker[a] & by_broker[b])[:5] for a in by_broker for b in by_broker if a < b}
    assert not any(shared.values()), f"the same producer ids from two brokers: {shared}"
    # a restarted broker takes a fresh block: none of the ids it gave before, nor anyone else's
    first = cluster.brokers[0]
    first.stop()
    first.start()
    cluster.wait_formed()
    with kafka_wire.connect(first.bootstrap) as conn:
        pid = conn.init_producer_id()[0]
    assert all(pid not in ids for ids in by_broker.values()), pid


@pytest.mark.timeout(180)
def test_a_second_broker_with_the_same_node_id_refuses_to_start(cluster, tmp_path):
    first = cluster.brokers[1]
    dup = ClusterBroker(tmp_path / "dup", kubeconfig=first.kubeconfig, node_id=first.node_id,
                        port=free_port(), overrides=dict(first.overrides), start_timeout=90)
    with pytest.raises(BrokerStartError, match="exited with code 3") as e:
        dup.start()
    assert f"node.id {first.node_id} is already registered" in str(e.value)
    assert cluster.wait_formed() in (1, 2, 3)
    assert sorted(cluster.views()[1][0]) == [1, 2, 3]


@pytest.mark.timeout(180)
def test_a_broker_of_another_cluster_id_refuses_to_start(cluster, tmp_path):
    first = cluster.brokers[0]
    stranger = ClusterBroker(tmp_path / "stranger", kubeconfig=first.kubeconfig, node_id=9, port=free_port(),
                             overrides={**first.overrides, "cluster.id": "AnotherClusterIdAAAAA"}, start_timeout=90)
    with pytest.raises(BrokerStartError, match="exited with code 4") as e:
        stranger.start()
    log = str(e.value)
    assert "refusing to start" in log and "belongs to another cluster" in log
    assert "Traceback" not in log
    assert sorted(cluster.views()[first.node_id][0]) == [1, 2, 3]


@pytest.mark.timeout(300)
def test_api_server_outage_keeps_data_flowing_and_refuses_metadata_changes(cluster, kube_env):
    cp = kube_env.control_plane
    if cp is None:
        pytest.skip("needs the test control plane's own kube-apiserver process (not FLOTILLA_KUBECONFIG)")
    topic = create_topic(cluster.brokers[0], 3)
    leaders = cluster.wait_leaders(topic, 3)
    cp.stop_apiserver()
    try:
        time.sleep(2)
        # data keeps flowing to the leaders
        for p, leader in leaders.items():
            with kafka_wire.connect(cluster.broker(leader).bootstrap) as conn:
                part = conn.produce(topic, p, kafka_wire.build_batch([kafka_wire.Msg(b"k", b"during")]), acks=1)
                assert int(part.error_code) == 0
        # metadata changes are refused with a retriable error
        with kafka_wire.connect(cluster.brokers[1].bootstrap) as conn:
            code = conn.create_topic(kafka_wire.unique_topic("outage"), 1)
        assert int(code) == int(ErrorCode.not_controller), code
        time.sleep(max(0.0, 30 - 2 - LEASE_S))  # the 30 s outage, longer than the Lease
        # still serving what they lead, from every broker's view
        for b in cluster.brokers:
            assert cluster.leaders(topic, via=b) == leaders
    finally:
        cp.start_apiserver()
    cluster.wait_formed(timeout=60)
    later = create_topic(cluster.brokers[2], 3)
    assert set(cluster.wait_leaders(later, 3).values()) <= {1, 2, 3}
    assert cluster.wait_leaders(topic, 3) == leaders
    with kafka_wire.connect(cluster.broker(leaders[0]).bootstrap) as conn:
        assert conn.list_offsets(topic, 0) == 1


@pytest.mark.timeout(180)
def test_grow_and_delete_through_any_broker(cluster):
    """CreatePartitions and DeleteTopics sent to brokers that lead nothing of the topic: the
    controller places the new partitions, every leader removes its partitions' data."""
    from confluent_kafka.admin import AdminClient, NewPartitions

    topic = create_topic(cluster.brokers[0], 3)
    leaders = cluster.wait_leaders(topic, 3)
    admin1 = AdminClient({"bootstrap.servers": cluster.brokers[1].bootstrap})
    admin1.create_partitions([NewPartitions(topic, 9)])[topic].result(30)
    grown = cluster.wait_leaders(topic, 9)
    assert {p: grown[p] for p in leaders} == leaders  # existing partitions keep their leaders
    assert set(grown.values()) == {1, 2, 3}
    # Each leader creates its partition's directory as it applies the change, which may be just
    # after another broker's Metadata showed the leader.
    for p, leader in grown.items():
        wait_for(f"broker {leader} to create {topic}-{p}",
                 lambda: (cluster.broker(leader).data_dir / f"{topic}-{p}").is_dir(), timeout=30, interval=0.2)
    admin2 = AdminClient({"bootstrap.servers": cluster.brokers[2].bootstrap})
    admin2.delete_topics([topic])[topic].result(30)
    for b in cluster.brokers:
        wait_for(f"{topic} gone from broker {b.node_id}",
                 lambda: int(cluster.metadata(b, [topic]).topics[0].error_code)
                 == int(ErrorCode.unknown_topic_or_partition), timeout=15)
    for p, leader in grown.items():
        wait_for(f"{topic}-{p} removed from broker {leader}'s disk",
                 lambda: not (cluster.broker(leader).data_dir / f"{topic}-{p}").exists(), timeout=15)


@pytest.mark.timeout(180)
def test_a_kafkatopic_applied_with_kubectl_is_usable_and_client_topics_are_kafkatopics(cluster, kube_env):
    """Topics as Kubernetes resources, end to end: `kubectl apply` of a KafkaTopic -> the controller
    assigns it -> clients produce and consume; a client-created topic shows in `kubectl get`."""
    import json

    ns = cluster.namespace
    name = kafka_wire.unique_topic("applied").lower().replace("_", "-")
    manifest = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
                "metadata": {"name": name, "labels": {"flotilla.io/cluster": cluster.name}},
                "spec": {"partitions": 6, "replicas": 1}}
    kube_env.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    leaders = cluster.wait_leaders(name, 6, via=cluster.brokers[1])
    assert set(leaders.values()) == {1, 2, 3}
    client = family("confluent")
    sent = keyed_records(30, keys=10)
    client.produce(cluster.bootstrap, name, sent)
    got = client.consume_and_commit(cluster.bootstrap, name, new_group(), len(sent))
    assert sorted((r.key, r.value) for r in got) == sorted(sent)

    def row(obj_name: str) -> list[str]:
        out = kube_env.kubectl("get", "kafkatopics", "-n", ns, obj_name, "--no-headers", check=False).stdout
        return out.split()
    # NAME CLUSTER TOPIC PARTITIONS RF UNDER-REPLICATED OFFLINE READY ... (the status the brokers write)
    wait_for(f"kubectl get kafkatopics {name}", lambda: row(name)[1:8],
             until=lambda got: got == [cluster.name, name, "6", "1", "0", "0", "True"], timeout=30)
    made = create_topic(cluster.brokers[2], 2, prefix="client")
    wait_for(f"{made} as a KafkaTopic", lambda: row(f"{cluster.name}-{made.lower()}")[1:8],
             until=lambda got: got == [cluster.name, made, "2", "1", "0", "0", "True"], timeout=30)


@pytest.mark.timeout(120)
def test_a_broker_whose_registration_is_taken_over_stops(cluster, kube_env):
    """Two processes must never serve as one node: if another holder takes over a broker's Lease,
    that broker notices at its next renewal and stops (exit code 3), naming why."""
    fenced = cluster.broker(2)
    kube_env.kubectl("patch", "lease", "-n", cluster.namespace, f"{cluster.name}-broker-2", "--type", "merge",
                     "-p", '{"spec": {"holderIdentity": "another-process"}}')
    wait_for("broker 2 to stop", lambda: fenced.proc is not None and fenced.proc.poll() is not None,
             timeout=3 * LEASE_S)
    assert fenced.proc.returncode == 3
    assert "this broker is fenced and stops" in fenced.log_text()
