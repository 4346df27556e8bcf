"""The Kubernetes metadata backend on the real kube-apiserver + etcd of `flotilla testenv`.

The shared contract (tests/support/metadata_contract.py) runs here as it does for the file backend;
the rest is what only a shared store has: a second store sees changes through its watch, node ids
are exclusive, the controller Lease elects one controller and fences it at its renew deadline,
expired brokers drop out, KafkaTopics made with kubectl appear, the etcd object size limit is
respected, a watch older than the API server's history re-lists, and an API server outage leaves
reads working, fails writes with StoreUnavailable and heals without a restart.

    .venv/bin/pytest -m kube tests/e2e/test_metadata_kube.py
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import time
import uuid
from pathlib import Path

import pytest

from broker.metadata import kube_objects as ko
from broker.metadata.kube_store import KubernetesMetadataStore
from broker.metadata.store import (NO_TOPIC_ID, DuplicateBroker, MetadataError, PartitionState, StoreUnavailable,
                                   TopicTooLarge, new_topic)
from flotilla.testenv.brokers.crds import install_crds
from tests.support.metadata_contract import MetadataStoreContract, registration
from flotilla.testenv.waiting import wait_for_async

pytestmark = pytest.mark.kube

# Long enough that a loaded 2-core machine (kubectl runs in threads, never on the event loop) does
# not miss a renewal; the tests assert orderings and states, never how long something took.
LEASE_S = 6.0


@pytest.fixture(scope="module")
def topic_crd(kube_env):
    install_crds(kube_env)


@pytest.fixture
async def stores(kube_env, kube_namespace, topic_crd, monkeypatch):
    """Makes started stores of one cluster (`fleet`) in the test namespace; closes them afterwards."""
    monkeypatch.setenv("KUBECONFIG", str(kube_env.kubeconfig))
    made: list[KubernetesMetadataStore] = []

    async def make(cluster: str = "fleet", **kw) -> KubernetesMetadataStore:
        s = KubernetesMetadataStore(cluster_id="cid-" + cluster, cluster_name=cluster, namespace=kube_namespace,
                                    lease_duration_s=kw.pop("lease_duration_s", LEASE_S), **kw)
        await s.start()
        made.append(s)
        return s

    yield make
    for s in made:
        await s.close()


async def eventually(check, timeout: float = 30.0, what: str | None = None):
    """Wait (without blocking the stores' event loop) until check() is truthy; a timeout names the
    check's source and the last value or exception it gave."""
    return await wait_for_async(what or _source(check), check, timeout=timeout, interval=0.05)


def _source(check) -> str:
    try:
        return inspect.getsource(check).strip()
    except (OSError, TypeError):
        return repr(check)


async def kubectl(kube_env, *args: str, **kw):
    """kubectl in a thread: the stores renew their Leases on this event loop meanwhile."""
    return await asyncio.to_thread(kube_env.kubectl, *args, **kw)


def kill(store: KubernetesMetadataStore) -> None:
    """Stop a store as kill -9 would: nothing renewed, nothing released."""
    for t in store._tasks + ([store._renewer] if store._renewer else []):
        t.cancel()
    store._tasks, store._renewer = [], None
    store._registration = None
    store._controller_node = None


class TestKubernetesStore(MetadataStoreContract):
    @pytest.fixture
    async def store(self, stores):
        return await stores()


# -- what a shared store adds ---------------------------------------------------------------------
async def test_a_second_store_sees_changes_through_its_watch(stores):
    a, b = await stores(), await stores()
    relists = dict(b.relists)
    t = await a.create_topic(new_topic("orders", 3))
    await eventually(lambda: "orders" in b.image.topics)
    assert b.relists == relists, "the change came through b's watch, not a re-list"
    assert b.image.topics["orders"] == t and b.image.topic_by_id(t.topic_id).name == "orders"
    t2 = await a.update_topic(dataclasses.replace(t, assignment=(PartitionState(1, 0, (1,), (1,)),) * 3))
    await eventually(lambda: b.image.topics["orders"] == t2)
    await b.delete_topic("orders")
    await eventually(lambda: "orders" not in a.image.topics)


async def test_the_same_node_id_cannot_register_twice(stores):
    a, b = await stores(), await stores()
    await a.register_broker(registration(1, 9092))
    await eventually(lambda: 1 in b.image.brokers)
    with pytest.raises(DuplicateBroker, match="node.id 1"):
        await b.register_broker(registration(1, 9093))
    # Still refused after longer than the Lease duration: the first process keeps renewing it.
    await asyncio.sleep(LEASE_S * 1.3)
    with pytest.raises(DuplicateBroker):
        await b.register_broker(registration(1, 9093))
    assert b.image.brokers[1].endpoints[0].port == 9092
    # Another node id is fine, and a graceful close hands the node id over at once.
    await b.register_broker(registration(2, 9094))
    await a.close()
    await eventually(lambda: 1 not in b.image.brokers)
    c = await stores()
    await c.register_broker(registration(1, 9095))
    await eventually(lambda: b.image.brokers.get(1) and b.image.brokers[1].endpoints[0].port == 9095)


async def test_a_killed_broker_drops_out_after_its_lease_and_its_node_id_can_be_reused(stores):
    a, b = await stores(), await stores()
    await a.register_broker(registration(1, 9092, rack="zone-a"))
    await b.register_broker(registration(2, 9093))
    await eventually(lambda: set(b.image.brokers) == {1, 2})
    assert b.image.brokers[1].rack == "zone-a"
    changes = []
    b.subscribe(lambda old, new: changes.append((set(old.brokers), set(new.brokers))))
    kill(a)
    killed = time.monotonic()
    await eventually(lambda: set(b.image.brokers) == {2}, timeout=LEASE_S * 10)
    assert time.monotonic() - killed >= LEASE_S * 0.5  # not before the Lease could have expired
    assert ({1, 2}, {2}) in changes  # subscribers hear of an expiry by time
    restarted = await stores()
    with pytest.raises(DuplicateBroker):  # a fresh process first watches the Lease for a full duration
        await restarted.register_broker(registration(1, 9096))
    await asyncio.sleep(LEASE_S + 0.5)
    await restarted.register_broker(registration(1, 9096))
    await eventually(lambda: b.image.brokers.get(1) and b.image.brokers[1].endpoints[0].port == 9096)


async def test_one_controller_fenced_at_its_renew_deadline_then_replaced(stores):
    a, b = await stores(), await stores()
    assert await a.campaign(1)
    assert not await b.campaign(2)
    await eventually(lambda: b.image.controller_id == 1)
    assert a.is_controller(1) and not b.is_controller(2)
    # Renewing within the deadline keeps the Lease; b keeps losing.
    for _ in range(3):
        await asyncio.sleep(LEASE_S / 3)
        assert await a.campaign(1) and not await b.campaign(2)
    # a stops renewing (hung, or cut off): it must stop acting as controller before b can win.
    # b campaigns all along; whenever it wins, a has already fenced itself (never two controllers).
    async def b_wins() -> bool:
        won = await b.campaign(2)
        assert not (won and a.is_controller(1)), "two controllers at once"
        return won

    await eventually(b_wins, timeout=LEASE_S * 10, what="b to win the controller Lease a stopped renewing")
    assert not a.is_controller(1) and b.is_controller(2)
    await eventually(lambda: a.image.controller_id == 2)
    assert not await a.campaign(1)  # the old controller cannot take it back while b renews


async def test_closing_the_controller_releases_its_lease(stores):
    a, b = await stores(), await stores()
    assert await a.campaign(1)
    await eventually(lambda: b.image.controller_id == 1)
    await a.close()
    await eventually(lambda: b.image.controller_id is None)
    assert await b.campaign(2)  # no waiting for expiry


async def test_kubectl_made_topic_appears_for_the_controller_to_complete(stores, kube_env, kube_namespace):
    s = await stores(default_partitions=4, default_replication_factor=1)
    manifest = {
        "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
        "metadata": {"name": "clicks", "labels": {ko.CLUSTER_LABEL: "fleet"}},
        "spec": {"config": {"retention.ms": 60000, "retention.bytes": 1048576, "preallocate": False}},
    }
    await kubectl(kube_env, "apply", "-n", kube_namespace, "-f", "-", input=json.dumps(manifest))
    rec = await eventually(lambda: s.image.topics.get("clicks"))
    assert rec.topic_id == NO_TOPIC_ID and rec.assignment is None
    assert rec.partitions == 4 and rec.replication_factor == 1  # the brokers' defaults
    assert rec.configs == {"retention.ms": "60000", "retention.bytes": "1048576", "preallocate": "false"}
    # The controller completes it: an id and an assignment; `kubectl get` then shows it ready.
    done = await s.update_topic(dataclasses.replace(
        rec, topic_id=uuid.uuid4(), assignment=tuple(PartitionState(1, 0, (1,), (1,)) for _ in range(4))))
    out = (await kubectl(kube_env, "get", "kafkatopics", "-n", kube_namespace, "clicks", "--no-headers")).stdout.split()
    # NAME, CLUSTER, TOPIC, PARTITIONS, RF, UNDER-REPLICATED, OFFLINE, READY, REASON
    assert out[:9] == ["clicks", "fleet", "clicks", "4", "1", "0", "0", "True", "Assigned"]
    # A topic of another cluster in the same namespace is not ours; one labelled with the older
    # app.kubernetes.io/instance is (the markers).
    # (The watch delivers in order: once a topic of ours applied after it shows, it was seen.)
    other = dict(manifest, metadata={"name": "elsewhere", "labels": {ko.CLUSTER_LABEL: "other"}})
    await kubectl(kube_env, "apply", "-n", kube_namespace, "-f", "-", input=json.dumps(other))
    marker = dict(manifest, metadata={"name": "marker-1", "labels": {ko.INSTANCE_LABEL: "fleet"}})
    await kubectl(kube_env, "apply", "-n", kube_namespace, "-f", "-", input=json.dumps(marker))
    await eventually(lambda: "marker-1" in s.image.topics)
    assert "elsewhere" not in s.image.topics
    # kubectl apply again (spec only) keeps the status the brokers wrote.
    await kubectl(kube_env, "apply", "-n", kube_namespace, "-f", "-", input=json.dumps(manifest))
    marker = dict(manifest, metadata={"name": "marker-2", "labels": {ko.INSTANCE_LABEL: "fleet"}})
    await kubectl(kube_env, "apply", "-n", kube_namespace, "-f", "-", input=json.dumps(marker))
    await eventually(lambda: "marker-2" in s.image.topics)
    assert s.image.topics["clicks"].topic_id == done.topic_id


async def test_client_made_topics_are_kafkatopics_with_valid_names(stores, kube_env, kube_namespace):
    s = await stores()
    t = await s.create_topic(new_topic("__consumer_offsets", 2))
    await s.create_topic(new_topic("orders", 1))
    listing = json.loads((await kubectl(kube_env, "get", "kafkatopics", "-n", kube_namespace, "-o", "json")).stdout)
    by_topic = {o["spec"]["topicName"]: o for o in listing["items"]}
    assert by_topic["orders"]["metadata"]["name"] == "fleet-orders"
    internal = by_topic["__consumer_offsets"]
    assert internal["metadata"]["name"].startswith("fleet-consumer-offsets-")
    # Its id: in an annotation until the controller's first assignment writes status.topicId (the
    # API server drops status from a create: the status subresource).
    assert internal["metadata"]["annotations"][ko.TOPIC_ID_ANNOTATION] == ko.topic_id_text(t.topic_id)
    assert ko.record_from_topic(internal).topic_id == t.topic_id
    assert internal["spec"]["partitions"] == 2
    assert internal["metadata"]["labels"] == {ko.CLUSTER_LABEL: "fleet", ko.CREATED_BY_LABEL: ko.CREATED_BY_FLEET}


async def test_invalid_kafkatopics_are_refused_naming_the_field(topic_crd, kube_env, kube_namespace):
    def apply(spec):
        manifest = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
                    "metadata": {"name": "bad", "labels": {ko.INSTANCE_LABEL: "fleet"}}, "spec": spec}
        return kube_env.kubectl("apply", "-n", kube_namespace, "-f", "-", input=json.dumps(manifest), check=False)

    r = apply({"topicName": "no spaces", "partitions": 1})
    assert r.returncode != 0 and "spec.topicName" in r.stderr
    r = apply({"partitions": 0})
    assert r.returncode != 0 and "spec.partitions" in r.stderr
    r = apply({"partitions": 9000, "replicas": 3})
    assert r.returncode != 0 and "spec.partitions" in r.stderr and "etcd" in r.stderr
    assert apply({"partitions": 4}).returncode == 0
    r = apply({"partitions": 2})
    assert r.returncode != 0 and "spec.partitions cannot decrease" in r.stderr
    assert apply({"partitions": 4, "topicName": "bad"}).returncode == 0  # may be added, equal to the name
    r = apply({"partitions": 4, "topicName": "other"})
    assert r.returncode != 0 and "spec.topicName is immutable" in r.stderr


async def test_partitions_per_kafkatopic_bounded_by_etcds_object_size_limit(stores, kube_env, kube_namespace):
    s = await stores()
    for rf in (1, 3):
        limit = s.max_partitions(rf)
        assert limit == ko.max_partitions(rf) and limit >= 5000
        with pytest.raises(TopicTooLarge, match="etcd"):
            await s.create_topic(new_topic(f"too-big-{rf}", limit + 1, replication_factor=rf))
        # The largest allowed topic, with every number in its assignment at its widest, is stored.
        t = await s.create_topic(new_topic(f"largest-{rf}", limit, replication_factor=rf))
        worst = PartitionState(2 ** 31 - 1, 2 ** 31 - 1, (2 ** 31 - 1,) * rf, (2 ** 31 - 1,) * rf)
        t = await s.update_topic(dataclasses.replace(t, assignment=(worst,) * limit))
        assert len(s.image.topics[f"largest-{rf}"].assignment) == limit
        raw = (await kubectl(kube_env, "get", "kafkatopic", "-n", kube_namespace,
                             ko.topic_object_name("fleet", t.name), "-o", "json")).stdout
        stored = json.dumps(json.loads(raw), separators=(",", ":")).encode()  # etcd keeps compact JSON
        assert ko.TOPIC_OBJECT_BUDGET * 0.9 < len(stored) < ko.ETCD_OBJECT_LIMIT
        with pytest.raises(TopicTooLarge):
            await s.update_topic(dataclasses.replace(t, partitions=limit + 1))
    # The limit is real: etcd refuses an object beyond 1.5 MiB.
    huge = ko.topic_object("fleet", new_topic("huge", 1))
    huge["spec"]["config"] = {"padding": "x" * (ko.ETCD_OBJECT_LIMIT + 1024)}
    r = await kubectl(kube_env, "create", "-n", kube_namespace, "-f", "-", input=json.dumps(huge), check=False)
    assert r.returncode != 0 and "too large" in (r.stderr + r.stdout).lower()


async def test_an_expired_watch_lists_again(stores):
    s = await stores()
    other = await stores()
    # A watch from a resourceVersion older than the API server keeps answers 410 Gone.
    task = asyncio.create_task(s._watch("topics", "1"))
    try:
        await eventually(lambda: s.expired_watches["topics"] >= 1 and s.relists["topics"] >= 1)
        await other.create_topic(new_topic("after-410", 1))
        await eventually(lambda: "after-410" in s.image.topics)
    finally:
        task.cancel()


@pytest.mark.timeout(450)  # longer than the sum of its waits and sleeps (about 330 s)
async def test_api_server_outage(stores, kube_env, kube_namespace):
    cp = kube_env.control_plane
    if cp is None or not hasattr(cp, "stop_apiserver"):
        pytest.skip("needs the testenv control plane (not an external cluster)")
    a, b = await stores(), await stores()
    await a.register_broker(registration(1, 9092))
    await b.register_broker(registration(2, 9093))
    assert await a.campaign(1)
    t = await a.create_topic(new_topic("kept", 2))
    await eventually(lambda: set(b.image.brokers) == {1, 2} and "kept" in b.image.topics)
    before = b.image
    await asyncio.to_thread(cp.stop_apiserver)  # the stores' event loop keeps running meanwhile
    try:
        # Writes fail retriably (StoreUnavailable, not a hang).
        for write in (lambda: a.create_topic(new_topic("new", 1)),
                      lambda: a.update_topic(dataclasses.replace(t, partitions=3)),
                      lambda: a.delete_topic("kept"),
                      lambda: b.campaign(2)):
            with pytest.raises(StoreUnavailable):
                await asyncio.wait_for(write(), 15)
        # The controller that cannot renew stops being controller at its renew deadline.
        fenced = time.monotonic()
        await eventually(lambda: not a.is_controller(1), timeout=LEASE_S * 10)
        # Reads keep being served; nobody is dropped for Leases nobody can renew: the Leases have
        # all expired by now (two durations after a's renew deadline).
        await asyncio.sleep(max(0.0, LEASE_S * 2 - (time.monotonic() - fenced)))
        for s in (a, b):
            assert set(s.image.brokers) == {1, 2}
            assert s.image.topics["kept"] == t and s.image.topic_by_id(t.topic_id) == t
        assert b.image.topics == before.topics
    finally:
        await asyncio.to_thread(cp.start_apiserver)
    # Recovery without restarting anything: writes work, and changes made elsewhere reach the image.
    async def retry(write):
        deadline = time.monotonic() + 30
        while True:
            try:
                return await write()
            except StoreUnavailable:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    await retry(lambda: a.create_topic(new_topic("after-outage", 1)))
    await eventually(lambda: "after-outage" in b.image.topics)
    assert await retry(lambda: a.campaign(1)) and a.is_controller(1)
    manifest = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
                "metadata": {"name": "from-kubectl", "labels": {ko.INSTANCE_LABEL: "fleet"}}, "spec": {"partitions": 1}}
    await kubectl(kube_env, "apply", "-n", kube_namespace, "-f", "-", input=json.dumps(manifest))
    await eventually(lambda: "from-kubectl" in a.image.topics and "from-kubectl" in b.image.topics)
    # Both brokers renew again, so both stay registered after a full Lease duration.
    await asyncio.sleep(LEASE_S * 1.5)
    assert set(a.image.brokers) == {1, 2} == set(b.image.brokers)


async def test_two_kafkatopics_naming_one_topic_the_older_wins(stores, kube_env, kube_namespace):
    s = await stores()
    t = await s.create_topic(new_topic("orders", 2))
    dup = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
           "metadata": {"name": "orders-again", "labels": {ko.INSTANCE_LABEL: "fleet"}},
           "spec": {"topicName": "orders", "partitions": 7}}
    await kubectl(kube_env, "apply", "-n", kube_namespace, "-f", "-", input=json.dumps(dup))
    await eventually(lambda: "orders-again" in s._topic_objs)
    assert s.image.topics["orders"] == t  # the first one keeps the name
    await s.delete_topic("orders")
    await eventually(lambda: s.image.topics.get("orders") is not None and s.image.topics["orders"].partitions == 7)


async def test_a_takeover_seen_by_the_watch_ends_controllership_at_once(stores, kube_env, kube_namespace):
    # A Lease so long that its renew deadline (2/3 of it) is beyond every wait here: only the watch
    # can end a's controllership in time.
    a = await stores(lease_duration_s=600)
    assert await a.campaign(1) and a.is_controller(1)
    await kubectl(kube_env, "patch", "lease", ko.controller_lease_name("fleet"), "-n", kube_namespace,
                  "--type=merge", "-p", json.dumps({"spec": {"holderIdentity": "7", "renewTime": ko.micro_time()}}))
    await eventually(lambda: not a.is_controller(1), timeout=60)
    await eventually(lambda: a.image.controller_id == 7)
    assert not await a.campaign(1)


async def test_in_a_pod_with_exactly_the_role_the_operator_grants_brokers(kube_env, kube_namespace, topic_crd,
                                                                         tmp_path, monkeypatch):
    """In-cluster configuration (service account token, CA, namespace file, KUBERNETES_SERVICE_*),
    authorised only by the operator's broker Role: every store operation works, nothing else is
    allowed."""
    import base64
    from urllib.parse import urlsplit

    import yaml
    from kubernetes_asyncio.config import incluster_config

    from broker.metadata import kube_api
    from flotilla_operator.builders.rbac import BROKER_RULES

    ns, sa = kube_namespace, "fleet-broker"
    kube_env.kubectl("create", "serviceaccount", sa, "-n", ns)
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": sa, "namespace": ns}, "rules": BROKER_RULES}
    kube_env.kubectl("apply", "-f", "-", input=json.dumps(role))
    kube_env.kubectl("create", "rolebinding", sa, "-n", ns, f"--role={sa}", f"--serviceaccount={ns}:{sa}")
    token = kube_env.kubectl("create", "token", sa, "-n", ns).stdout.strip()
    kubeconfig = yaml.safe_load(Path(kube_env.kubeconfig).read_text())
    cluster = kubeconfig["clusters"][0]["cluster"]
    secrets = tmp_path / "serviceaccount"
    secrets.mkdir()
    (secrets / "token").write_text(token)
    (secrets / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    (secrets / "namespace").write_text(ns)
    server = urlsplit(cluster["server"])
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", server.hostname)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(server.port))
    monkeypatch.setattr(kube_api, "SERVICE_ACCOUNT_NAMESPACE", secrets / "namespace")
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(secrets / "token"))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(secrets / "ca.crt"))
    assert kube_api.in_cluster()

    s = KubernetesMetadataStore(cluster_id="cid", cluster_name="fleet", lease_duration_s=LEASE_S)
    await s.start()
    try:
        assert s.namespace == ns  # the pod's own namespace
        await s.register_broker(registration(1, 9092))
        assert await s.campaign(1)
        t = await s.create_topic(new_topic("orders", 2))
        t = await s.update_topic(dataclasses.replace(t, assignment=(PartitionState(1, 0, (1,), (1,)),) * 2))
        await asyncio.sleep(LEASE_S * 1.5)  # background renewals and the watches run under the same Role
        assert await s.campaign(1)  # renewing the controller Lease too
        assert set(s.image.brokers) == {1} and s.image.controller_id == 1
        await s.delete_topic("orders")
        assert await s.allocate_producer_ids(10) < await s.allocate_producer_ids(10)  # the producer-id Lease
    finally:
        await s.close()
    who = f"--as=system:serviceaccount:{ns}:{sa}"
    for verb, resource in [("get", "configmaps"), ("list", "secrets"), ("create", "pods"),
                           ("list", "kafkaclusters.flotilla.io")]:
        assert kube_env.kubectl("auth", "can-i", verb, resource, "-n", ns, who, check=False).stdout.strip() == "no"
    assert kube_env.kubectl("auth", "can-i", "list", "leases", "-n", "default", who, check=False).stdout.strip() == "no"


async def test_producer_id_blocks_of_two_brokers_never_overlap(stores):
    """Two brokers' stores race for blocks on the one producer-id Lease: the compare-and-swap gives
    every block to exactly one of them."""
    a, b = await stores(), await stores()
    starts = await asyncio.gather(*(s.allocate_producer_ids(100) for s in (a, b) * 10))
    assert sorted(starts) == list(range(0, 2000, 100))


async def test_a_broker_with_another_cluster_id_cannot_join(stores):
    a = await stores()
    await a.register_broker(registration(1, 9092))
    stranger = KubernetesMetadataStore(cluster_id="some-other-id", cluster_name="fleet", namespace=a.namespace,
                                       lease_duration_s=LEASE_S)
    await stranger.start()
    try:
        await eventually(lambda: 1 in stranger.image.brokers)
        with pytest.raises(MetadataError, match="cluster.id"):
            await stranger.register_broker(registration(2, 9093))
        assert 2 not in a.image.brokers
    finally:
        await stranger.close()


async def test_lease_renewals_do_not_make_the_controller_plan_again(stores):
    """Issue 18 item 8: every broker renews its Lease every third of its duration; a renewal that
    changes no registration must not re-plan every topic (only membership changes do)."""
    from broker.controller.controller import Controller

    a, b = await stores(), await stores()
    await a.register_broker(registration(1, 9092))
    await b.register_broker(registration(2, 9093))
    names = [f"renewals-{i}" for i in range(20)]
    for name in names:
        await a.create_topic(new_topic(name, 2))
    ctl = Controller(a, 1, grace_s=0)
    ctl.start()
    try:
        await eventually(lambda: ctl.active and all(a.image.topics[n].assignment for n in names))
        await eventually(lambda: not ctl._wake.is_set() and not ctl._dirty and not ctl._plan_all)
        membership = []  # images whose live brokers or controller differ from the one before
        a.subscribe(lambda old, new: membership.append(new) if (dict(old.brokers), old.controller_id)
                    != (dict(new.brokers), new.controller_id) else None)
        planned, images = ctl.planned, []
        a.subscribe(lambda old, new: images.append(new))
        renewals = []

        def b_renewed_three_times() -> list[str]:
            seen = ko.lease_spec(a._leases[ko.broker_lease_name("fleet", 2)]).get("renewTime")
            if not renewals or renewals[-1] != seen:
                renewals.append(seen)
            return len(renewals) > 3 and renewals

        await eventually(b_renewed_three_times, timeout=LEASE_S * 5)
        # Each membership change (a Lease judged expired on a loaded machine) may re-plan everything.
        assert ctl.planned - planned <= len(a.image.topics) * len(membership), (ctl.planned - planned, membership)
        assert len(images) == len(membership), "renewals of Leases published images"
    finally:
        await ctl.stop()


async def test_isr_changes_of_many_partitions_of_a_topic_are_one_write(stores):
    """Issue 18 item 8: a leader shrinking the ISR of every partition of a topic at once (a
    follower fell behind on all) writes the KafkaTopic once for all of them, not once per
    partition racing the others into Conflicts (and dropping changes after ten of them)."""
    from broker.replica import isr_updates

    s = await stores()
    await s.register_broker(registration(1, 9093))
    partitions = 40
    t = await s.create_topic(new_topic("isr-batch", partitions, 3))
    t = await s.update_topic(dataclasses.replace(t, assignment=tuple(
        PartitionState(1, 3, (1, 2, 3), (1, 2, 3)) for _ in range(partitions))))
    calls = []
    update_topic = s.update_topic

    async def counted(rec):
        calls.append(rec.version)
        return await update_topic(rec)

    s.update_topic = counted
    results = await asyncio.gather(*(isr_updates.write_isr(s, "isr-batch", t.topic_id, i, 1, 3, frozenset({1, 2}),
                                                           frozenset({1, 2, 3})) for i in range(partitions)))
    assert results == [frozenset({1, 2})] * partitions, "every partition's change was written"
    assert [p.isr for p in s.image.topics["isr-batch"].assignment] == [(1, 2)] * partitions
    assert len(calls) == 1, f"{len(calls)} writes of the KafkaTopic for {partitions} partitions' ISR changes"
