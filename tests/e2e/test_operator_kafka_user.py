"""The operator against a broker whose only client listener requires SASL (issue 23): it
authenticates as its own SCRAM user (clients/credentials.py), so a ClientQuota applies (without
credentials its admin client is refused), and a KafkaUser gives a real client a password in a
Secret, ACLs that follow Git, and a credential that goes with the resource.

One broker on Kubernetes metadata (the test API server holds its stored SCRAM credentials and
ACLs, which the operator writes to) with the authorizer on and no ACL meaning no access; its
PLAINTEXT listener is the inter-broker one only (the test harness's readiness check). The
operator runs in-process (kopf) and reaches the broker through the paused stand-in KafkaCluster's
annotation.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_kafka_user.py
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import time
from datetime import datetime, timezone
from typing import Any, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from flotilla_operator.clients import kafka_admin
from tests.support.kopf_operator import in_process_operator
from tests.e2e.test_acls import _codes, _consume, _produce
from tests.e2e.test_operator import apply, condition, free_port, get_json
from tests.e2e.test_scram_credentials import auth_error
from flotilla.testenv.brokers.cluster import BrokerCluster
from flotilla.testenv.brokers.crds import install_crds, remove_crds
from tests.support.outside_cluster import stand_in_cluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(240),
              pytest.mark.flotilla_only("the operator drives a Flotilla broker on Kubernetes metadata")]

CLUSTER = "demo"


@pytest.fixture
def sasl_broker(tmp_path, kube_env, kube_namespace):
    """A broker of cluster `demo` whose client listener is SASL_PLAINTEXT/SCRAM-SHA-512 only."""
    c = BrokerCluster(tmp_path / "broker", kube_env, kube_namespace, size=1, name=CLUSTER, overrides={
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        # what the operator renders into server.properties of a SASL cluster (builders/configmap.py)
        "super.users": "User:flotilla-operator"})
    (b,) = c.brokers
    b.sasl_port = free_port()
    b.overrides["listeners"] = f"INTERNAL://127.0.0.1:{b.port},SASL_PLAINTEXT://127.0.0.1:{b.sasl_port}"
    b.overrides["advertised.listeners"] = b.overrides["listeners"]
    with c:
        yield b


@contextlib.contextmanager
def running_operator(kube_env) -> Iterator[Any]:
    """The operator in-process (kopf's KopfRunner) until the block ends: a test can stop it and
    start it again."""
    with in_process_operator({"KUBECONFIG": str(kube_env.kubeconfig),
                              "FLOTILLA_OPERATOR_METRICS_ADDRESS": f"127.0.0.1:{free_port()}",
                              "FLOTILLA_OPERATOR_LIVENESS_ADDRESS": "off"}) as runner:
        yield runner


@pytest.fixture
def user_operator(kube_env, sasl_broker):
    install_crds(kube_env)
    with running_operator(kube_env) as runner:
        yield runner
    remove_crds(kube_env)


def _secret(kube_env, ns: str, name: str) -> dict[str, str]:
    obj = get_json(kube_env, "secret", name, "-n", ns)
    return {k: base64.b64decode(v).decode() for k, v in obj["data"].items()}


def _sasl(address: str, user: str, password: str) -> dict[str, str]:
    return {"bootstrap.servers": address, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user, "sasl.password": password}


def _ready(kube_env, kind: str, ns: str, name: str, reason: str = "Applied") -> dict:
    """The object once its Ready condition has `reason` for its generation (a timeout shows the
    last condition)."""
    def check():
        obj = get_json(kube_env, kind, name, "-n", ns, check=False)
        return obj, condition(obj, "Ready")

    def done(got) -> bool:
        obj, ready = got
        return ready.get("reason") == reason and ready.get("observedGeneration") == obj["metadata"]["generation"]
    return wait_for(f"{kind} {name}: Ready reason {reason}", check, until=done, timeout=60)[0]


def _group_error(conf: dict, group: str) -> int:
    """The Kafka error of reading `group`'s committed offsets as `conf`'s user (0: allowed)."""
    admin = AdminClient(conf)
    try:
        admin.describe_consumer_groups([group])[group].result(15)
        return 0
    except KafkaException as exc:
        return exc.args[0].code()


USER_ACLS = [
    {"resource": {"type": "topic", "name": "orders", "patternType": "prefix"}, "operations": ["Write", "Describe", "Read"]},
    {"resource": {"type": "group", "name": "g"}, "operations": ["Read"]},
]


def test_the_operator_authenticates_and_a_kafka_user_works_end_to_end(kube_env, kube_namespace, sasl_broker,
                                                                      user_operator):
    ns, address = kube_namespace, f"127.0.0.1:{sasl_broker.sasl_port}"
    cluster = stand_in_cluster(CLUSTER, ns, address)
    cluster["spec"]["listeners"] = [{"name": "SASL_PLAINTEXT", "port": 9092, "protocol": "SASL_PLAINTEXT"}]
    apply(kube_env, cluster)
    # Without credentials the operator's admin client is refused on this listener (before this
    # change every ClientQuota of such a cluster was Unreachable).
    with pytest.raises(kafka_admin.AdminError):
        asyncio.run(kafka_admin.brokers(address))

    # A ClientQuota applies: the operator authenticated as flotilla-operator.
    apply(kube_env, {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "app-q", "namespace": ns},
                     "spec": {"clusterRef": {"name": CLUSTER}, "entity": {"clientId": "app"}, "producerByteRate": 1048576}})
    quota = _ready(kube_env, "clientquota", ns, "app-q")
    assert quota["status"]["brokers"] == [{"nodeId": 1, "producerByteRate": 1048576}]
    operator = _secret(kube_env, ns, f"{CLUSTER}-operator-credentials")
    assert operator["username"] == "flotilla-operator"
    admin = AdminClient(_sasl(address, "flotilla-operator", operator["password"]))
    for f in admin.create_topics([NewTopic("orders-1", 1, 1), NewTopic("other", 1, 1)]).values():
        f.result(30)

    user = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": "app", "namespace": ns},
            "spec": {"clusterRef": {"name": CLUSTER}, "authentication": {"type": "scram-sha-512"},
                     "authorization": {"acls": USER_ACLS}, "quotas": {"producerByteRate": 2097152}}}
    apply(kube_env, user)
    got = _ready(kube_env, "kafkauser", ns, "app")
    assert (got["status"]["username"], got["status"]["secret"]) == ("app", "app")
    creds = _secret(kube_env, ns, "app")
    assert creds["username"] == "app" and f'password="{creds["password"]}"' in creds["sasl.jaas.config"]
    conf = _sasl(address, "app", creds["password"])

    # produce and consume where the ACLs allow; another topic is refused
    assert _produce(conf, "orders-1", 3) == []
    values, errors = _consume(conf, "orders-1", "g", 3)
    assert (values, errors) == ([b"v0", b"v1", b"v2"], [])
    assert _codes(_produce(conf, "other", 1)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    assert _group_error(conf, "g") == 0

    # Git is the truth: the group rule removed from the object takes the group away
    edited = copy.deepcopy(user)
    edited["spec"]["authorization"]["acls"] = USER_ACLS[:1]
    apply(kube_env, edited)
    wait_for("the consumer's group access to go with its ACL", lambda: _group_error(conf, "g"),
             until=lambda code: code == KafkaError.GROUP_AUTHORIZATION_FAILED, timeout=60)
    assert _produce(conf, "orders-1", 1) == []  # the rest stays

    # deleting the KafkaUser removes its credential: authentication fails
    kube_env.kubectl("delete", "kafkauser", "app", "-n", ns, "--wait=true", "--timeout=60s")
    wait_for("the deleted KafkaUser's credential to be refused", lambda: auth_error(conf),
             until=lambda message: "invalid credentials" in message.lower() or "authentication" in message.lower(),
             timeout=60)


def _held(address: str, operator: dict[str, str], user: str) -> dict[str, float]:
    """What the broker holds for the user entity (DescribeClientQuotas as the operator's user)."""
    auth = kafka_admin.AdminAuth("SASL_PLAINTEXT", operator["username"], operator["password"])
    return asyncio.run(kafka_admin.describe_client_quota(address, {"user": user}, auth))


def _holds_throughout(address: str, operator: dict[str, str], user: str, want: dict[str, float],
                      seconds: float) -> list[dict[str, float]]:
    """Every second for `seconds` (longer than the operator's 10 s resync when it matters): what
    the broker held, to show the quota never flips between the two resources."""
    import time

    seen, end = [], time.monotonic() + seconds
    while time.monotonic() < end:
        seen.append(_held(address, operator, user))
        time.sleep(1.0)
    return [s for s in seen if s != want]


def test_a_kafka_user_and_a_client_quota_of_one_user_do_not_fight(kube_env, kube_namespace, sasl_broker,
                                                                  user_operator):
    """A KafkaUser's spec.quotas and a ClientQuota of the same user name one entity: the oldest
    resource owns it, the other is reported and applies nothing, and deleting the one that lost
    removes nothing (GitOps tools apply both every few minutes: the quota must not flip)."""
    ns, address = kube_namespace, f"127.0.0.1:{sasl_broker.sasl_port}"
    cluster = stand_in_cluster(CLUSTER, ns, address)
    cluster["spec"]["listeners"] = [{"name": "SASL_PLAINTEXT", "port": 9092, "protocol": "SASL_PLAINTEXT"}]
    apply(kube_env, cluster)

    def kafka_user(name: str, rate: int) -> dict:
        return {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": name, "namespace": ns},
                "spec": {"clusterRef": {"name": CLUSTER}, "authentication": {"type": "scram-sha-512"},
                         "quotas": {"producerByteRate": rate}}}

    def client_quota(name: str, user: str, rate: int) -> dict:
        return {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": name, "namespace": ns},
                "spec": {"clusterRef": {"name": CLUSTER}, "entity": {"user": user}, "producerByteRate": rate}}

    def strictly_older(kind: str, name: str) -> None:
        """Returns once an object created now is newer than `name` by creationTimestamp, whose
        resolution is one second: created within the same second the two would tie, and a tie
        goes to the kind first in the alphabet (ClientQuota), not to the one created first."""
        created = get_json(kube_env, kind, name, "-n", ns)["metadata"]["creationTimestamp"]
        born = datetime.strptime(created, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
        time.sleep(max(0.0, born + 1.1 - time.time()))

    # The KafkaUser first: it owns user alice's quota; the newer ClientQuota reports Conflict.
    apply(kube_env, kafka_user("alice", 2097152))
    _ready(kube_env, "kafkauser", ns, "alice")
    operator = _secret(kube_env, ns, f"{CLUSTER}-operator-credentials")
    strictly_older("kafkauser", "alice")
    apply(kube_env, client_quota("alice-q", "alice", 1048576))
    lost = _ready(kube_env, "clientquota", ns, "alice-q", reason="Conflict")
    assert "KafkaUser alice" in condition(lost, "Ready")["message"], condition(lost, "Ready")
    assert _holds_throughout(address, operator, "alice", {"producer_byte_rate": 2097152.0}, 12) == []
    kube_env.kubectl("delete", "clientquota", "alice-q", "-n", ns, "--wait=true", "--timeout=60s")
    assert _holds_throughout(address, operator, "alice", {"producer_byte_rate": 2097152.0}, 5) == []

    # The ClientQuota first: the newer KafkaUser works (credential, Ready) but applies no quota.
    apply(kube_env, client_quota("bob-q", "bob", 1048576))
    _ready(kube_env, "clientquota", ns, "bob-q")
    strictly_older("clientquota", "bob-q")
    apply(kube_env, kafka_user("bob", 4194304))
    bob = wait_for("KafkaUser bob to report the quota conflict", lambda: get_json(kube_env, "kafkauser", "bob", "-n", ns),
                   until=lambda u: bool((u.get("status") or {}).get("quotaConflict")), timeout=60)
    assert "ClientQuota bob-q" in bob["status"]["quotaConflict"], bob["status"]
    assert condition(bob, "Ready")["status"] == "True" and "quotas not applied" in condition(bob, "Ready")["message"]
    assert "quotas" not in bob["status"], bob["status"]
    warned = get_json(kube_env, "events", "-n", ns, "--field-selector", "involvedObject.name=bob")["items"]
    assert any(e["reason"] == "QuotaConflict" and e["type"] == "Warning" for e in warned), warned
    conf = _sasl(address, "bob", _secret(kube_env, ns, "bob")["password"])
    wait_for("the KafkaUser's credential to work", lambda: auth_error(conf), until=lambda message: message == "",
             timeout=30)
    assert _holds_throughout(address, operator, "bob", {"producer_byte_rate": 1048576.0}, 12) == []
    # Deleting the KafkaUser that lost removes its credential, not the ClientQuota's quota.
    kube_env.kubectl("delete", "kafkauser", "bob", "-n", ns, "--wait=true", "--timeout=60s")
    wait_for("the deleted KafkaUser's credential to be refused", lambda: auth_error(conf),
             until=lambda message: "authentication" in message.lower() or "invalid credentials" in message.lower(),
             timeout=60)
    assert _holds_throughout(address, operator, "bob", {"producer_byte_rate": 1048576.0}, 3) == []


def _condition_met(what: str, check, until, timeout: float, runner, log_file) -> Any:
    """wait_for, with the operator's log saved to `log_file` and its end printed on a timeout."""
    try:
        return wait_for(what, check, until=until, timeout=timeout)
    except pytest.fail.Exception:
        log_file.write_text(runner.output)
        print(f"operator log ({log_file}), last lines:\n{runner.output[-6000:]}")
        raise


@pytest.fixture
def crds(kube_env):
    install_crds(kube_env)
    yield
    remove_crds(kube_env)


def test_a_user_and_a_quota_deleted_while_the_operator_is_down_lose_their_access(kube_env, kube_namespace, sasl_broker,
                                                                                 crds, tmp_path):
    """Issue 38, finding 5: no finalizer holds a KafkaUser, so one deleted while the operator is
    stopped was never removed from the brokers and its client kept logging in. The operator
    records what it applies (ConfigMap demo-operator-owned) and its orphan pass, at start and
    every quota resync, removes what gone resources owned; a principal's ACLs it never wrote stay."""
    from confluent_kafka.admin import AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType
    from confluent_kafka.admin import ResourceType

    from flotilla_operator.reconcilers.loops import QUOTA_RESYNC_S

    ns, address = kube_namespace, f"127.0.0.1:{sasl_broker.sasl_port}"
    cluster = stand_in_cluster(CLUSTER, ns, address)
    cluster["spec"]["listeners"] = [{"name": "SASL_PLAINTEXT", "port": 9092, "protocol": "SASL_PLAINTEXT"}]
    apply(kube_env, cluster)
    user = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": "leaver", "namespace": ns},
            "spec": {"clusterRef": {"name": CLUSTER}, "authentication": {"type": "scram-sha-512"},
                     "authorization": {"acls": USER_ACLS}}}
    quota = {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "leaver-q", "namespace": ns},
             "spec": {"clusterRef": {"name": CLUSTER}, "entity": {"clientId": "leaver-app"}, "producerByteRate": 1048576}}
    with running_operator(kube_env):
        apply(kube_env, user)
        apply(kube_env, quota)
        _ready(kube_env, "kafkauser", ns, "leaver")
        _ready(kube_env, "clientquota", ns, "leaver-q")
    conf = _sasl(address, "leaver", _secret(kube_env, ns, "leaver")["password"])
    operator = _secret(kube_env, ns, f"{CLUSTER}-operator-credentials")
    admin = AdminClient(_sasl(address, "flotilla-operator", operator["password"]))
    # ACLs of a principal no resource owns, written with the admin API (kafka-acls): never touched
    outsider = AclBinding(ResourceType.TOPIC, "outsider-topic", ResourcePatternType.LITERAL, "User:outsider", "*",
                          AclOperation.READ, AclPermissionType.ALLOW)
    for f in admin.create_acls([outsider]).values():
        f.result(15)
    auth = kafka_admin.AdminAuth("SASL_PLAINTEXT", operator["username"], operator["password"])

    def held_quota() -> dict[str, float]:
        return asyncio.run(kafka_admin.describe_client_quota(address, {"client-id": "leaver-app"}, auth))

    assert auth_error(conf) == "" and held_quota() == {"producer_byte_rate": 1048576.0}

    # The operator is stopped; both resources are deleted (nothing holds them: no finalizer).
    kube_env.kubectl("delete", "kafkauser", "leaver", "-n", ns, "--wait=true", "--timeout=60s")
    kube_env.kubectl("delete", "clientquota", "leaver-q", "-n", ns, "--wait=true", "--timeout=60s")
    assert auth_error(conf) == "", "nobody removed the credential yet: the client still logs in"

    with running_operator(kube_env) as runner:
        # the pass runs at start, then every QUOTA_RESYNC_S: one resync at most, plus the start-up
        _condition_met("the deleted KafkaUser's login to be refused", lambda: auth_error(conf),
                       lambda message: "authentication" in message.lower() or "invalid credentials" in message.lower(),
                       QUOTA_RESYNC_S + 20, runner, tmp_path / "operator.log")
        _condition_met("the deleted ClientQuota's quota to be removed", held_quota, lambda held: held == {},
                       QUOTA_RESYNC_S, runner, tmp_path / "operator.log")
        kc = _condition_met("OrphansRemoved on the KafkaCluster",
                            lambda: get_json(kube_env, "kafkacluster", CLUSTER, "-n", ns),
                            lambda kc: condition(kc, "OrphansRemoved").get("status") == "True",
                            QUOTA_RESYNC_S, runner, tmp_path / "operator.log")
    removed = condition(kc, "OrphansRemoved")
    assert "KafkaUser leaver" in removed["message"] and "ClientQuota leaver-q" in removed["message"], removed
    events = get_json(kube_env, "events", "-n", ns, "--field-selector", f"involvedObject.name={CLUSTER}")["items"]
    assert any(e["reason"] == "OrphansRemoved" for e in events), [e["reason"] for e in events]
    record = get_json(kube_env, "configmap", f"{CLUSTER}-operator-owned", "-n", ns)
    assert record["data"]["owners.json"] == "{}", record["data"]
    got = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                               AclOperation.ANY, AclPermissionType.ANY)).result(15)
    assert {b.principal for b in got} == {"User:outsider"}, got  # leaver's ACLs gone, the outsider's kept


def test_the_admin_clients_speak_sasl_ssl_with_the_clusters_ca(tmp_path):
    """SASL_SSL: kafka_admin (TLS trusting the given CA, then SCRAM) and record_admin's librdkafka
    settings reach a real broker; a wrong password is refused with the broker's message."""
    from confluent_kafka.admin import AdminClient as Admin

    from flotilla_operator.clients.record_admin import client_settings
    from tests.support.secure_broker import USERS, running_secure_broker

    with running_secure_broker("flotilla", tmp_path) as sb:
        address, ca = sb.address("SASL_SSL"), sb.pki.ca_file.read_text()
        auth = kafka_admin.AdminAuth("SASL_SSL", "alice", USERS["alice"], ca_pem=ca)
        assert [b.node_id for b in asyncio.run(kafka_admin.brokers(address, auth))] == [1]
        with pytest.raises(kafka_admin.AdminError, match="authentication failed as alice"):
            asyncio.run(kafka_admin.brokers(address, kafka_admin.AdminAuth("SASL_SSL", "alice", "wrong", ca_pem=ca)))
        with pytest.raises(kafka_admin.AdminError):  # the system's CAs do not know the test CA
            asyncio.run(kafka_admin.brokers(address, kafka_admin.AdminAuth("SASL_SSL", "alice", USERS["alice"])))
        md = Admin(client_settings(address, auth)).list_topics(timeout=15)
        assert list(md.brokers) == [1]
