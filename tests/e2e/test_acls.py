"""ACLs with real clients over SASL (issue 23, authorization): Kafka's StandardAuthorizer semantics
and error codes, ACLs managed with confluent-kafka's AdminClient and Kafka 4.1's own kafka-acls.

One broker per module (tests/support/acl_broker.py): PLAINTEXT is User:ANONYMOUS, a super user
(the admin here); over SASL/PLAIN alice gets rights from ACLs, bob gets none or fewer, admin is a
super user. Every test uses its own topics, groups and transactional ids, and the same tests run
against Apache Kafka 4.1 configured alike (`--kafka-target=apache`), except where marked.
"""

from __future__ import annotations

import subprocess
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)

from flotilla.testenv.brokers import kafka_tools
from tests.support.acl_broker import AclBroker, make_acl_broker
from tests.support.prometheus import metric
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

ANY_HOST = "*"


@pytest.fixture(scope="module")
def acl(kafka_target, tmp_path_factory) -> AclBroker:
    ab = make_acl_broker(kafka_target, tmp_path_factory.mktemp("acls") / "broker")
    ab.broker.start()
    try:
        yield ab
    finally:
        ab.broker.close()


@pytest.fixture(scope="module")
def admin(acl) -> AdminClient:
    return AdminClient({"bootstrap.servers": acl.admin_bootstrap})


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _topic(admin: AdminClient, prefix: str) -> str:
    name = _name(prefix)
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    return name


def _allow(principal: str, rt, name: str, *ops, pattern=ResourcePatternType.LITERAL,
           permission=AclPermissionType.ALLOW) -> list[AclBinding]:
    return [AclBinding(rt, name, pattern, principal, ANY_HOST, op, permission) for op in ops]


def _grant(admin: AdminClient, bindings: list[AclBinding]) -> None:
    for f in admin.create_acls(bindings).values():
        f.result(30)


def _produce(conf: dict, topic: str, n: int = 3, **extra) -> list:
    """Produce n records; the delivery errors (empty: all delivered)."""
    errors: list = []
    p = Producer({**conf, "message.timeout.ms": 10000, "acks": "all", **extra})
    for i in range(n):
        p.produce(topic, f"v{i}".encode(), partition=0,
                  on_delivery=lambda err, _m: err is not None and errors.append(err))
    assert p.flush(30) == 0, "producer did not finish"
    return errors


def _codes(errors) -> set:
    return {e.code() for e in errors}


def _eventually_produces(conf: dict, topic: str) -> None:
    """Kafka applies a new ACL once its brokers have the metadata record: wait for it."""
    wait_for(f"{conf['sasl.username']} may write {topic}", lambda: _produce(conf, topic, 1) or True,
             until=lambda r: r is True, timeout=30)


def _consume(conf: dict, topic: str, group: str | None, want: int, timeout_s: float = 20) -> tuple[list, list]:
    """(values, errors) of a consumer that subscribes with `group` (or assigns, without one)."""
    c = Consumer({**conf, "group.id": group or _name("unused"), "auto.offset.reset": "earliest",
                  "enable.auto.commit": False})
    values, errors = [], []
    try:
        if group:
            c.subscribe([topic])
        else:
            c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while len(values) < want and not errors and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if group is None and m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    continue  # librdkafka looks up the coordinator of its (unused) group anyway
                errors.append(m.error())
            else:
                values.append(m.value())
        if group and values:
            c.commit(asynchronous=False)
    finally:
        c.close()
    return values, errors


def test_create_describe_delete_acls_with_the_admin_client(admin):
    """CreateAcls, DescribeAcls (ANY and MATCH filters) and DeleteAcls, as the AdminClient sends them."""
    topic, prefix = _name("acl-admin"), _name("acl-admin-prefix")
    lit = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", ANY_HOST,
                     AclOperation.READ, AclPermissionType.ALLOW)
    pre = AclBinding(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, "User:alice", ANY_HOST,
                     AclOperation.WRITE, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.GROUP, topic, ResourcePatternType.LITERAL, "User:bob", "10.9.9.9",
                      AclOperation.ALL, AclPermissionType.DENY)
    _grant(admin, [lit, pre, deny])
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)
    # Kafka's brokers answer DescribeAcls from their copy of the metadata: wait for it to follow.
    wait_for("the new ACLs listed", lambda: set(admin.describe_acls(everything).result(30)),
             until=lambda found: {lit, pre, deny} <= found, timeout=30)
    match = AclBindingFilter(ResourceType.TOPIC, prefix + "-orders", ResourcePatternType.MATCH, None, None,
                             AclOperation.ANY, AclPermissionType.ANY)
    assert set(admin.describe_acls(match).result(30)) == {pre}
    by_principal = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                                    AclOperation.ANY, AclPermissionType.ANY)
    assert deny in set(admin.describe_acls(by_principal).result(30))
    # Creating an existing binding again succeeds and adds nothing.
    _grant(admin, [lit])
    only_topic = AclBindingFilter(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None,
                                  AclOperation.ANY, AclPermissionType.ANY)
    assert admin.describe_acls(only_topic).result(30) == [lit]
    deleted = admin.delete_acls([only_topic, by_principal])
    assert [sorted(map(str, f.result(30))) for f in deleted.values()] == [[str(lit)], [str(deny)]]
    wait_for("the deleted ACLs gone", lambda: set(admin.describe_acls(everything).result(30)),
             until=lambda left: lit not in left and deny not in left and pre in left, timeout=30)
    cleanup = AclBindingFilter(ResourceType.TOPIC, prefix, ResourcePatternType.PREFIXED, None, None,
                               AclOperation.ANY, AclPermissionType.ANY)
    assert admin.delete_acls([cleanup])[cleanup].result(30) == [pre]


def test_invalid_acls_are_refused(admin):
    bad_cluster = AclBinding(ResourceType.BROKER, "other-cluster", ResourcePatternType.LITERAL, "User:alice",
                             ANY_HOST, AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        admin.create_acls([bad_cluster])[bad_cluster].result(30)
    assert e.value.args[0].code() == KafkaError.INVALID_REQUEST, e.value


def _kafka_acls(bootstrap: str, *args: str, command_config: str | None = None) -> subprocess.CompletedProcess:
    """Kafka 4.1's kafka-acls.sh (org.apache.kafka.tools.AclCommand)."""
    extra = ["--command-config", command_config] if command_config else []
    return subprocess.run(kafka_tools.command("AclCommand", "--bootstrap-server", bootstrap, *extra, *args),
                          capture_output=True, text=True, timeout=120)


def test_kafka_acls_tool_adds_lists_and_removes(acl, admin, tmp_path):
    topic, group = _name("acl-cli"), _name("acl-cli-group")
    out = _kafka_acls(acl.admin_bootstrap, "--add", "--allow-principal", "User:alice", "--operation", "Read",
                      "--operation", "Describe", "--topic", topic, "--group", group)
    assert out.returncode == 0, out.stdout + out.stderr
    out = _kafka_acls(acl.admin_bootstrap, "--add", "--deny-principal", "User:bob", "--operation", "All",
                      "--topic", topic[:10], "--resource-pattern-type", "prefixed")
    assert out.returncode == 0, out.stdout + out.stderr
    # Kafka's brokers list ACLs from their copy of the metadata: wait for it to have them.
    text = wait_for("kafka-acls lists alice's ACLs", lambda: _kafka_acls(acl.admin_bootstrap, "--list", "--topic",
                                                                         topic).stdout,
                    until=lambda out: "operation=DESCRIBE, permissionType=ALLOW" in out, timeout=60)
    assert f"name={topic}, patternType=LITERAL" in text, text
    assert "principal=User:alice, host=*, operation=READ, permissionType=ALLOW" in text, text
    assert "principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW" in text, text
    assert f"name={topic[:10]}, patternType=PREFIXED" not in text  # --list names the literal resource only
    matched = _kafka_acls(acl.admin_bootstrap, "--list", "--topic", topic, "--resource-pattern-type", "match")
    assert f"name={topic[:10]}, patternType=PREFIXED" in matched.stdout, matched.stdout
    assert "principal=User:bob, host=*, operation=ALL, permissionType=DENY" in matched.stdout, matched.stdout
    # bob may not change ACLs: the tool reports Kafka's ClusterAuthorizationException.
    props = tmp_path / "bob.properties"
    props.write_text(acl.java_client_properties("bob"))
    refused = _kafka_acls(f"127.0.0.1:{acl.sasl_port}", "--add", "--allow-principal", "User:bob", "--operation",
                          "All", "--topic", topic, command_config=str(props))
    assert "ClusterAuthorizationException" in refused.stdout + refused.stderr, refused.stdout + refused.stderr
    for args in (["--topic", topic, "--group", group], ["--topic", topic[:10], "--resource-pattern-type", "prefixed"]):
        out = _kafka_acls(acl.admin_bootstrap, "--remove", "--force", *args)
        assert out.returncode == 0, out.stdout + out.stderr
    wait_for("kafka-acls lists no ACL of alice's", lambda: _kafka_acls(acl.admin_bootstrap, "--list", "--topic",
                                                                       topic).stdout,
             until=lambda out: "User:alice" not in out, timeout=60)


def test_produce_needs_write_on_the_topic(acl, admin):
    topic = _topic(admin, "acl-produce")
    _grant(admin, _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
           + _allow("User:bob", ResourceType.TOPIC, topic, AclOperation.DESCRIBE))
    _eventually_produces(acl.sasl("alice"), topic)
    # bob may see the topic (DESCRIBE) but not write it: the Produce answer refuses each partition.
    assert _codes(_produce(acl.sasl("bob"), topic)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    _grant(admin, _allow("User:bob", ResourceType.TOPIC, topic, AclOperation.WRITE))
    _eventually_produces(acl.sasl("bob"), topic)  # the new ACL applies to bob's next request


def test_consume_needs_read_on_the_group_and_the_topic(acl, admin):
    topic, group = _topic(admin, "acl-consume"), _name("acl-consumers")
    assert _produce({"bootstrap.servers": acl.admin_bootstrap}, topic, 3) == []
    _grant(admin, _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.READ)
           + _allow("User:alice", ResourceType.GROUP, group, AclOperation.READ)
           + _allow("User:bob", ResourceType.TOPIC, topic, AclOperation.READ))
    values, errors = wait_for("alice consumes in her group", lambda: _consume(acl.sasl("alice"), topic, group, 3),
                              until=lambda r: len(r[0]) == 3, timeout=60)
    assert values == [b"v0", b"v1", b"v2"] and not errors
    # bob may read the topic, not the group: FindCoordinator/JoinGroup answer GROUP_AUTHORIZATION_FAILED.
    _, errors = _consume(acl.sasl("bob"), topic, group, 1)
    assert _codes(errors) == {KafkaError.GROUP_AUTHORIZATION_FAILED}, errors
    # Without a group (assign), bob reads; with DESCRIBE only, the fetch is refused.
    values, errors = _consume(acl.sasl("bob"), topic, None, 3)
    assert values == [b"v0", b"v1", b"v2"], errors
    other = _topic(admin, "acl-consume-describe-only")
    assert _produce({"bootstrap.servers": acl.admin_bootstrap}, other, 1) == []
    _grant(admin, _allow("User:bob", ResourceType.TOPIC, other, AclOperation.DESCRIBE))
    _, errors = wait_for("bob's fetch refused", lambda: _consume(acl.sasl("bob"), other, None, 1, 15),
                         until=lambda r: bool(r[1]), timeout=45)
    assert _codes(errors) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}, errors


def test_metadata_hides_topics_the_principal_may_not_describe(acl, admin):
    seen, hidden = _topic(admin, "acl-visible"), _topic(admin, "acl-hidden")
    _grant(admin, _allow("User:alice", ResourceType.TOPIC, seen, AclOperation.READ))  # READ implies DESCRIBE
    alice = AdminClient(acl.sasl("alice"))
    topics = wait_for("alice sees her topic", lambda: alice.list_topics(timeout=10).topics,
                      until=lambda t: seen in t, timeout=30)
    assert hidden not in topics
    # Asked by name, the hidden topic is TOPIC_AUTHORIZATION_FAILED (whether it exists or not).
    for name in (hidden, _name("acl-never-created")):
        md = alice.list_topics(topic=name, timeout=10)
        assert md.topics[name].error is not None and \
            md.topics[name].error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, md.topics[name].error
    assert hidden in AdminClient({"bootstrap.servers": acl.admin_bootstrap}).list_topics(timeout=10).topics


def test_transactional_id_needs_write(acl, admin):
    topic, tid = _topic(admin, "acl-txn"), _name("acl-txn-alice")
    _grant(admin, _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.WRITE)
           + _allow("User:alice", ResourceType.TRANSACTIONAL_ID, tid, AclOperation.WRITE)
           + _allow("User:bob", ResourceType.TOPIC, topic, AclOperation.WRITE))

    def transaction(user: str, transactional_id: str) -> None:
        p = Producer({**acl.sasl(user), "transactional.id": transactional_id, "message.timeout.ms": 10000})
        p.init_transactions(30)
        p.begin_transaction()
        p.produce(topic, b"in-a-transaction", partition=0)
        p.commit_transaction(30)

    wait_for("alice commits a transaction", lambda: transaction("alice", tid) or True,
             until=lambda r: r is True, timeout=45)
    with pytest.raises(KafkaException) as e:
        transaction("bob", _name("acl-txn-bob"))
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, e.value


def test_cluster_and_topic_admin_actions(acl, admin):
    bob = AdminClient(acl.sasl("bob"))
    binding = AclBinding(ResourceType.TOPIC, "anything", ResourcePatternType.LITERAL, "User:bob", ANY_HOST,
                         AclOperation.ALL, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as e:
        bob.create_acls([binding])[binding].result(30)
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED, e.value
    # DescribeAcls answers CLUSTER_AUTHORIZATION_FAILED, which librdkafka reports as no ACLs at all
    # (it does so with Apache Kafka too): what matters is that none is disclosed.
    _grant(admin, _allow("User:alice", ResourceType.GROUP, _name("acl-exists"), AclOperation.READ))
    assert bob.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                              AclOperation.ANY, AclPermissionType.ANY)).result(30) == []
    name = _name("acl-bob-creates")
    with pytest.raises(KafkaException) as e:
        bob.create_topics([NewTopic(name, 1, 1)])[name].result(30)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value
    # CREATE on a prefix lets bob create topics under it.
    prefix = _name("acl-bob-space")
    _grant(admin, _allow("User:bob", ResourceType.TOPIC, prefix, AclOperation.CREATE,
                         pattern=ResourcePatternType.PREFIXED))
    mine = prefix + ".t1"
    wait_for(f"bob creates {mine}", lambda: bob.create_topics([NewTopic(mine, 1, 1)])[mine].result(30) or True,
             until=lambda r: r is True, timeout=30)
    with pytest.raises(KafkaException) as e:
        bob.delete_topics([mine])[mine].result(30)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, e.value


def test_super_user_is_not_bound_by_acls(acl, admin):
    topic = _topic(admin, "acl-super")
    _grant(admin, _allow("User:*", ResourceType.TOPIC, topic, AclOperation.ALL, permission=AclPermissionType.DENY))
    assert _produce(acl.sasl("admin"), topic, 2) == []
    values, errors = _consume(acl.sasl("admin"), topic, None, 2)
    assert values == [b"v0", b"v1"], errors
    assert _codes(wait_for("alice refused", lambda: _produce(acl.sasl("alice"), topic, 1), timeout=30)) == {
        KafkaError.TOPIC_AUTHORIZATION_FAILED}


def test_deny_beats_allow_and_prefixed_patterns(acl, admin):
    prefix = _name("acl-team")
    open_topic, secret = _topic(admin, prefix + ".open"), _topic(admin, prefix + ".secret")
    _grant(admin, _allow("User:alice", ResourceType.TOPIC, prefix, AclOperation.ALL,
                         pattern=ResourcePatternType.PREFIXED)
           + _allow("User:alice", ResourceType.TOPIC, secret, AclOperation.READ, permission=AclPermissionType.DENY))
    _eventually_produces(acl.sasl("alice"), open_topic)
    assert _produce(acl.sasl("alice"), secret, 1) == []  # the DENY is for READ only
    values, errors = _consume(acl.sasl("alice"), open_topic, None, 1)
    assert values == [b"v0"], errors
    _, errors = wait_for("alice's read of the secret topic refused", lambda: _consume(acl.sasl("alice"), secret, None, 1),
                         until=lambda r: bool(r[1]), timeout=45)
    assert _codes(errors) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}, errors
    # Outside the prefix nothing is allowed (allow.everyone.if.no.acl.found=false).
    outside = _topic(admin, "acl-outside")
    assert _codes(_produce(acl.sasl("alice"), outside, 1)) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}


@pytest.mark.flotilla_only("Flotilla's metric")
def test_denials_are_counted_by_resource_type(acl, admin):
    topic = _topic(admin, "acl-metric")
    url = acl.broker.metrics_url
    before = metric(url, "flotilla_authorization_denials_total", resource_type="TOPIC", operation="DESCRIBE")
    alice = AdminClient(acl.sasl("alice"))
    alice.list_topics(topic=topic, timeout=10)
    wait_for("a DESCRIBE denial counted", lambda: metric(url, "flotilla_authorization_denials_total",
                                                          resource_type="TOPIC", operation="DESCRIBE"),
             until=lambda v: v > before, timeout=10)


def _refusal(future) -> int:
    """The Kafka error code an admin future fails with."""
    with pytest.raises(KafkaException) as e:
        future.result(30)
    return e.value.args[0].code()


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated")  # AlterConfigs is the API tested
def test_configs_records_groups_and_elections_need_their_acls(acl, admin):
    """bob may read and write a topic but not configure it, delete its records, see alice's group
    or elect leaders: each API answers its own authorization error."""
    from confluent_kafka import ConsumerGroupTopicPartitions, ElectionType
    from confluent_kafka.admin import ConfigResource

    topic, group = _topic(admin, "acl-admin-apis"), _name("acl-admin-group")
    _grant(admin, _allow("User:bob", ResourceType.TOPIC, topic, AclOperation.READ, AclOperation.WRITE)
           + _allow("User:alice", ResourceType.TOPIC, topic, AclOperation.READ)
           + _allow("User:alice", ResourceType.GROUP, group, AclOperation.READ))
    _eventually_produces(acl.sasl("bob"), topic)
    wait_for("alice's group commits", lambda: _consume(acl.sasl("alice"), topic, group, 1),
             until=lambda r: len(r[0]) == 1, timeout=60)
    bob = AdminClient(acl.sasl("bob"))
    resource = ConfigResource("topic", topic)
    assert _refusal(bob.describe_configs([resource])[resource]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    change = ConfigResource("topic", topic, set_config={"retention.ms": "3600000"})
    assert _refusal(bob.alter_configs([change])[change]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    tp = TopicPartition(topic, 0, 1)
    assert _refusal(bob.delete_records([tp])[tp]) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert group not in {g.group_id for g in bob.list_consumer_groups().result(30).valid}
    assert group in {g.group_id for g in admin.list_consumer_groups().result(30).valid}
    assert _refusal(bob.describe_consumer_groups([group])[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _refusal(bob.delete_consumer_groups([group])[group]) == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _refusal(bob.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]) == \
        KafkaError.GROUP_AUTHORIZATION_FAILED
    assert _refusal(bob.elect_leaders(ElectionType.PREFERRED, [TopicPartition(topic, 0)])) == \
        KafkaError.CLUSTER_AUTHORIZATION_FAILED
    # The super user (PLAINTEXT) may do all of it.
    assert admin.describe_configs([resource])[resource].result(30)["retention.ms"] is not None


# Operations' codes as bits of the *_authorized_operations fields (Kafka's AclOperation codes).
def _bits(*ops: AclOperation) -> int:
    return sum(1 << op.value for op in ops)


NOT_REQUESTED = -(2**31)
ALL_TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                        AclOperation.ALTER_CONFIGS}
ALL_GROUP_OPERATIONS = {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                        AclOperation.ALTER_CONFIGS}


def _kafka_python(acl: AclBroker, user: str | None = None):
    """kafka-python's admin client (it has the admin APIs confluent-kafka lacks): `user` over
    SASL, or the super user over PLAINTEXT."""
    from kafka import KafkaAdminClient

    if user is None:
        return KafkaAdminClient(bootstrap_servers=acl.admin_bootstrap, request_timeout_ms=30000)
    return KafkaAdminClient(**acl.kafka_python(user))


def _log_dirs_error(client) -> int:
    """DescribeLogDirs' top-level error code, which kafka-python's describe_log_dirs does not report."""
    from kafka.protocol.admin import DescribeLogDirsRequest

    return client._manager.run(client._manager.send, DescribeLogDirsRequest(topics=None)).error_code


def _alter_log_dir_errors(client, topic: str) -> set:
    """AlterReplicaLogDirs' per-partition error codes for `topic`-0 (kafka-python has no call for it)."""
    from kafka.protocol.admin import AlterReplicaLogDirsRequest as R

    req = R(dirs=[R.AlterReplicaLogDir(path="/no-such-dir", topics=[
        R.AlterReplicaLogDir.AlterReplicaLogDirTopic(name=topic, partitions=[0])])])
    resp = client._manager.run(client._manager.send, req)
    return {p.error_code for t in resp.results for p in t.partitions}


def _commit_offsets(su, group: str, tps: list) -> None:
    """Give `group` committed offsets (0) for `tps`, as the super user; a new Kafka cluster answers
    COORDINATOR_NOT_AVAILABLE until its offsets topic exists, hence the retries."""
    from kafka.structs import OffsetAndMetadata

    wait_for(f"{group}'s offsets committed",
             lambda: su.alter_group_offsets(group, {tp: OffsetAndMetadata(0, "", -1) for tp in tps}),
             until=lambda r: bool(r) and all(e.__name__ == "NoError" for e in r.values()), timeout=60)


def _cluster_operations(conf: dict) -> set:
    """The cluster's authorized operations as confluent-kafka's describe_cluster reports them."""
    client = AdminClient(conf)  # kept until the answer is in: a collected client fails its futures
    described = client.describe_cluster(include_authorized_operations=True, request_timeout=30)
    return set(described.result(30).authorized_operations or ())


def test_cluster_admin_apis_need_their_cluster_acls(acl, admin):
    """DescribeLogDirs, DescribeQuorum and ListPartitionReassignments need DESCRIBE on the cluster,
    ListConfigResources DESCRIBE_CONFIGS, AlterPartitionReassignments and AlterReplicaLogDirs ALTER (else
    CLUSTER_AUTHORIZATION_FAILED); the cluster's authorized operations (Metadata through
    confluent-kafka, DescribeCluster through kafka-python) say what carol may do."""
    import kafka.errors as kerr
    from kafka import TopicPartition as KpTopicPartition

    topic = _topic(admin, "acl-cluster-apis")
    carol = _kafka_python(acl, "carol")
    cancel = {KpTopicPartition(topic, 0): None}
    try:
        assert _log_dirs_error(carol) == KafkaError.CLUSTER_AUTHORIZATION_FAILED
        # AlterReplicaLogDirs needs ALTER on the cluster, answered per partition before the dir is looked at.
        assert _alter_log_dir_errors(carol, topic) == {KafkaError.CLUSTER_AUTHORIZATION_FAILED}
        su = _kafka_python(acl)
        try:
            assert _alter_log_dir_errors(su, topic) == {KafkaError.LOG_DIR_NOT_FOUND}
        finally:
            su.close()
        refused = carol.describe_log_dirs()
        assert refused and all(answer["log_dirs"] == [] for answer in refused), refused
        for call in (carol.describe_metadata_quorum, lambda: carol.list_config_resources(["TOPIC"]),
                     carol.list_partition_reassignments, lambda: carol.alter_partition_reassignments(cancel)):
            with pytest.raises(kerr.ClusterAuthorizationFailedError):
                call()
        assert _cluster_operations(acl.sasl("carol")) == set()
        assert carol.describe_cluster()["authorized_operations"] == []

        _grant(admin, _allow("User:carol", ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE,
                             AclOperation.DESCRIBE_CONFIGS))
        wait_for("carol may describe log dirs", lambda: _log_dirs_error(carol), until=lambda code: code == 0,
                 timeout=30)
        assert any(answer["log_dirs"] for answer in carol.describe_log_dirs())
        assert carol.describe_metadata_quorum()["topics"][0]["partitions"][0]["leader_id"] >= 0
        # Listed whether carol may describe the topic or not, as Kafka 4.1 does.
        assert topic in wait_for("carol lists config resources", lambda: carol.list_config_resources(["TOPIC"]),
                                 timeout=30)["topic"]
        assert carol.list_partition_reassignments() == {}
        with pytest.raises(kerr.ClusterAuthorizationFailedError):
            carol.alter_partition_reassignments(cancel)
        assert _cluster_operations(acl.sasl("carol")) == {AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS}
        assert set(carol.describe_cluster()["authorized_operations"]) == {"DESCRIBE", "DESCRIBE_CONFIGS"}
        assert len(_cluster_operations(acl.sasl("admin"))) == 7  # a super user: every cluster operation
    finally:
        carol.close()


def test_offset_delete_needs_delete_on_the_group_and_read_on_each_topic(acl, admin):
    """OffsetDelete (kafka-python's delete_group_offsets): GROUP_AUTHORIZATION_FAILED for the whole
    request without DELETE on the group; then TOPIC_AUTHORIZATION_FAILED for each topic bob may not
    READ, whether it exists or not."""
    import kafka.errors as kerr
    from kafka import TopicPartition as KpTopicPartition

    readable, unreadable, group = _topic(admin, "acl-offdel-r"), _topic(admin, "acl-offdel-u"), _name("acl-offdel")
    tps = [KpTopicPartition(readable, 0), KpTopicPartition(unreadable, 0), KpTopicPartition(_name("acl-none"), 0)]
    su, bob = _kafka_python(acl), _kafka_python(acl, "bob")
    try:
        _commit_offsets(su, group, tps[:2])
        coordinator = su.describe_cluster()["brokers"][0]["broker_id"]  # one broker: the coordinator
        with pytest.raises(kerr.GroupAuthorizationFailedError):
            bob.delete_group_offsets(group, tps, group_coordinator_id=coordinator)
        _grant(admin, _allow("User:bob", ResourceType.GROUP, group, AclOperation.DELETE)
               + _allow("User:bob", ResourceType.TOPIC, readable, AclOperation.READ))
        result = wait_for("bob may delete the group's offsets",
                          lambda: bob.delete_group_offsets(group, tps, group_coordinator_id=coordinator),
                          until=lambda r: isinstance(r, dict) and r.get(tps[0]) is kerr.NoError, timeout=30)
        assert result == {tps[0]: kerr.NoError, tps[1]: kerr.TopicAuthorizationFailedError,
                          tps[2]: kerr.TopicAuthorizationFailedError}
    finally:
        su.close()
        bob.close()


def test_describe_topic_partitions_and_authorized_operations(acl, admin):
    """DescribeTopicPartitions (kafka-python) answers TOPIC_AUTHORIZATION_FAILED for a topic asked
    by name that alice may not describe (existing or not) and leaves it out of "all topics"; each
    topic described, there and in Metadata (confluent-kafka's describe_topics), carries what alice
    may do on it, and DescribeGroups (describe_consumer_groups) what she may do on her group."""
    from confluent_kafka import TopicCollection
    from kafka import TopicPartition as KpTopicPartition

    seen, hidden, group = _topic(admin, "acl-ops-seen"), _topic(admin, "acl-ops-hidden"), _name("acl-ops-group")
    never = _name("acl-ops-never")
    _grant(admin, _allow("User:alice", ResourceType.TOPIC, seen, AclOperation.READ)
           + _allow("User:alice", ResourceType.GROUP, group, AclOperation.READ))
    su, alice = _kafka_python(acl), _kafka_python(acl, "alice")
    try:
        _commit_offsets(su, group, [KpTopicPartition(seen, 0)])
        answer = wait_for("alice describes her topic", lambda: alice.describe_topic_partitions([seen, hidden, never]),
                          until=lambda a: any(t["name"] == seen and t["error_code"] == 0 for t in a["topics"]),
                          timeout=30)
        by_name = {t["name"]: t for t in answer["topics"]}
        assert sorted(by_name) == sorted([seen, hidden, never])
        assert by_name[seen]["topic_authorized_operations"] == _bits(AclOperation.READ, AclOperation.DESCRIBE)
        assert [p["partition_index"] for p in by_name[seen]["partitions"]] == [0]
        for name in (hidden, never):
            assert (by_name[name]["error_code"], by_name[name]["partitions"],
                    by_name[name]["topic_authorized_operations"]) == (
                        KafkaError.TOPIC_AUTHORIZATION_FAILED, [], NOT_REQUESTED), by_name[name]
        every = {t["name"] for t in alice.describe_topic_partitions([])["topics"]}
        assert seen in every and hidden not in every
        assert su.describe_topic_partitions([seen])["topics"][0]["topic_authorized_operations"] == \
            _bits(*ALL_TOPIC_OPERATIONS)
    finally:
        su.close()
        alice.close()
    topics, alice_admin = TopicCollection([seen]), AdminClient(acl.sasl("alice"))
    described = alice_admin.describe_topics(topics, include_authorized_operations=True)
    assert set(described[seen].result(30).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert set(admin.describe_topics(topics, include_authorized_operations=True)[seen].result(30)
               .authorized_operations) == ALL_TOPIC_OPERATIONS
    groups = alice_admin.describe_consumer_groups([group], include_authorized_operations=True)
    assert set(groups[group].result(30).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    assert set(admin.describe_consumer_groups([group], include_authorized_operations=True)[group].result(30)
               .authorized_operations) == ALL_GROUP_OPERATIONS
    # Not asked for: not reported.
    assert admin.describe_consumer_groups([group])[group].result(30).authorized_operations is None



def test_scram_credential_apis_need_cluster_rights(acl, admin):
    """AlterUserScramCredentials needs ALTER and DescribeUserScramCredentials DESCRIBE on the cluster
    (else CLUSTER_AUTHORIZATION_FAILED); a super user authenticated over SASL has both. kafka-python's
    calls: confluent-kafka 2.16 corrupts its heap on a refused alter_user_scram_credentials."""
    import kafka.errors as kerr
    from kafka.admin import ScramMechanism, UserScramCredentialUpsertion

    user = _name("acl-scram")
    upsert = UserScramCredentialUpsertion(user, "SCRAM-SHA-512", b"a-password", iterations=8192)
    bob, sasl_admin = _kafka_python(acl, "bob"), _kafka_python(acl, "admin")
    try:
        assert bob.alter_user_scram_credentials([upsert])[user] is not None  # the refusal's message
        with pytest.raises(kerr.ClusterAuthorizationFailedError):
            bob.describe_user_scram_credentials([user])
        assert sasl_admin.describe_user_scram_credentials([user])[user]["credential_infos"] == []  # not stored
        assert sasl_admin.alter_user_scram_credentials([upsert]) == {user: None}
        described = wait_for(f"{user}'s credential described",
                             lambda: sasl_admin.describe_user_scram_credentials([user])[user]["credential_infos"],
                             timeout=30)
        assert described == [{"mechanism": ScramMechanism.SCRAM_SHA_512, "iterations": 8192}]
    finally:
        bob.close()
        sasl_admin.close()


# -- answers that must not say more than the caller may know (issue 38) -----------------------------

def _wire_as(acl: AclBroker, user: str):
    """A raw Kafka connection authenticated as `user` over SASL_PLAINTEXT/PLAIN."""
    from kio.schema.errors import ErrorCode
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    from flotilla.testenv import kafka_wire
    from tests.support.acl_broker import USERS

    conn = kafka_wire.connect(f"127.0.0.1:{acl.sasl_port}")
    assert conn.request(SaslHandshakeRequest(mechanism="PLAIN")).error_code == ErrorCode.none
    ok = conn.request(SaslAuthenticateRequest(auth_bytes=f"\0{user}\0{USERS[user]}".encode()))
    assert ok.error_code == ErrorCode.none, ok
    return conn


def test_describe_transactions_leaves_out_topics_the_caller_may_not_describe(acl, admin):
    """Kafka removes from DescribeTransactions' answer every topic the caller may not DESCRIBE."""
    from kio.schema.describe_transactions.v0.request import DescribeTransactionsRequest
    from kio.schema.errors import ErrorCode

    seen, hidden, tid = _topic(admin, "acl-txn-seen"), _topic(admin, "acl-txn-hidden"), _name("acl-txn-described")
    _grant(admin, _allow("User:bob", ResourceType.TRANSACTIONAL_ID, tid, AclOperation.DESCRIBE)
           + _allow("User:bob", ResourceType.TOPIC, seen, AclOperation.DESCRIBE))
    p = Producer({"bootstrap.servers": acl.admin_bootstrap, "transactional.id": tid, "message.timeout.ms": 10000})
    p.init_transactions(30)
    p.begin_transaction()
    for topic in (seen, hidden):
        p.produce(topic, b"open", partition=0)
    assert p.flush(30) == 0
    try:
        with _wire_as(acl, "bob") as conn:
            def describe():
                return conn.request(DescribeTransactionsRequest(transactional_ids=(tid,))).transaction_states[0]
            state = wait_for(f"bob describes the ongoing transaction {tid}", describe,
                             until=lambda s: s.error_code == ErrorCode.none and s.transaction_state == "Ongoing"
                             and any(t.topic == seen for t in s.topics), timeout=30)
        assert {t.topic for t in state.topics} == {seen}, state.topics
    finally:
        p.abort_transaction(30)


def test_create_topics_shows_configs_only_with_describe_configs(acl, admin):
    """Kafka answers a creator without DESCRIBE_CONFIGS on the new topic with
    TOPIC_AUTHORIZATION_FAILED in topic_config_error_code and no configs."""
    import datetime

    from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
    from kio.schema.errors import ErrorCode

    blind, told = _name("acl-create-blind"), _name("acl-create-told")
    _grant(admin, _allow("User:bob", ResourceType.TOPIC, blind, AclOperation.CREATE)
           + _allow("User:bob", ResourceType.TOPIC, told, AclOperation.CREATE, AclOperation.DESCRIBE_CONFIGS))

    def create(conn, name):
        return conn.request(CreateTopicsRequest(
            topics=(CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=(), configs=()),),
            timeout=datetime.timedelta(seconds=30), validate_only=False)).topics[0]

    with _wire_as(acl, "bob") as conn:
        results = {}
        for name in (blind, told):  # Kafka's brokers apply the new ACLs a moment later
            results[name] = wait_for(f"bob creates {name}", lambda: create(conn, name),
                                     until=lambda r: r.error_code != ErrorCode.topic_authorization_failed, timeout=30)
    assert results[blind].error_code == ErrorCode.none, results[blind]
    assert results[blind].topic_config_error_code == ErrorCode.topic_authorization_failed, results[blind]
    assert not results[blind].configs, results[blind].configs
    assert results[told].error_code == results[told].topic_config_error_code == ErrorCode.none, results[told]
    assert any(c.name == "cleanup.policy" for c in results[told].configs), results[told].configs
