"""The admin APIs users' tools call (issue 24), through the tools themselves over real sockets:
Kafka 4.1's kafka-log-dirs.sh, kafka-consumer-groups.sh --delete-offsets, kafka-metadata-quorum.sh
and kafka-topics.sh --describe (the Java admin client: DescribeLogDirs, OffsetDelete,
DescribeQuorum, DescribeTopicPartitions), confluent-kafka's delete_consumer_group_offsets,
kafka-python's describe_log_dirs and its version probe, and the wire for what the tools do not
show (pages and cursors of KIP-966, per-item errors, ListConfigResources). Passes against Apache
Kafka 4.1 too (`make interop-apache`).
"""

from __future__ import annotations

import json
import re
import subprocess

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from tests.support.clients import ConfluentFamily, keyed_records
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(240)


def run_tool(tool: str, *args: str) -> str:
    """A Kafka 4.1 tool's stdout (`kafka-<x>.sh` is `kafka-run-class.sh <its class>`); fails with its output."""
    try:
        kafka_tools.ensure_libs()
    except kafka_tools.ToolsMissing as e:
        pytest.skip(str(e))
    out = subprocess.run(kafka_tools.command(tool, *args), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"{tool} {args} exited {out.returncode}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out.stdout


def make_topic(bootstrap: str, prefix: str, partitions: int = 1, records: int = 0) -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(bootstrap) as conn:
        assert conn.create_topic(topic, partitions) == ErrorCode.none
    if records:
        ConfluentFamily().produce(bootstrap, topic, keyed_records(records), acks="all")
    return topic


# -- DescribeLogDirs -----------------------------------------------------------------------------

def test_kafka_log_dirs_tool_reports_partition_sizes(shared_broker):
    b = shared_broker.bootstrap
    full = make_topic(b, "logdirs", partitions=2)
    with kafka_wire.connect(b) as conn:
        assert conn.produce_when_led(full, 0, kafka_wire.build_batch([(None, b"v" * 100)] * 20)).error_code == ErrorCode.none
    out = run_tool("LogDirsCommand", "--bootstrap-server", b, "--describe", "--topic-list", full)
    listing = json.loads(out.strip().splitlines()[-1])
    [broker] = listing["brokers"]
    partitions = {p["partition"]: p for d in broker["logDirs"] for p in d["partitions"]}
    assert set(partitions) == {f"{full}-0", f"{full}-1"}, listing
    assert partitions[f"{full}-0"]["size"] > 2000 and partitions[f"{full}-1"]["size"] == 0, listing
    assert all(p["offsetLag"] == 0 and p["isFuture"] is False for p in partitions.values()), listing
    assert all(d["error"] is None for d in broker["logDirs"]), listing


def test_describe_log_dirs_on_the_wire(shared_broker):
    """KIP-827's total and usable bytes per dir; partitions of unknown topics are simply absent."""
    from kio.schema.describe_log_dirs.v4.request import DescribableLogDirTopic, DescribeLogDirsRequest

    b = shared_broker.bootstrap
    topic = make_topic(b, "logdirs-wire", records=5)
    req = DescribeLogDirsRequest(topics=(DescribableLogDirTopic(topic=topic, partitions=(i32(0), i32(7))),
                                         DescribableLogDirTopic(topic="no-such-topic", partitions=(i32(0),))))
    with kafka_wire.connect(b) as conn:
        resp = conn.request(req)
    assert resp.error_code == ErrorCode.none
    assert resp.results, resp
    for d in resp.results:
        assert d.error_code == ErrorCode.none and d.log_dir.startswith("/"), d
        assert 0 < d.usable_bytes <= d.total_bytes, d
    held = [(t.name, int(p.partition_index), int(p.partition_size)) for d in resp.results for t in d.topics
            for p in t.partitions]
    assert [(n, i) for n, i, _ in held] == [(topic, 0)], resp
    assert held[0][2] > 0


def test_kafka_python_describe_log_dirs(shared_broker):
    from kafka import KafkaAdminClient

    b = shared_broker.bootstrap
    topic = make_topic(b, "logdirs-kp", records=3)
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=30000)
    try:
        answers = admin.describe_log_dirs()
    finally:
        admin.close()
    text = repr(answers)
    assert topic in text, text[-3000:]


# -- OffsetDelete --------------------------------------------------------------------------------

def _commit(bootstrap: str, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Offsets committed by a consumer that only assign()s: the group stays Empty."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        c.close()


def _committed(bootstrap: str, group: str, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        got = c.committed([TopicPartition(t, p) for t, p in partitions], timeout=30)
    finally:
        c.close()
    return {(tp.topic, tp.partition): tp.offset for tp in got}


def _wire_offset_delete(bootstrap: str, group: str, partitions: dict[str, list[int]]):
    from kio.schema.offset_delete.v0.request import (OffsetDeleteRequest, OffsetDeleteRequestPartition,
                                                     OffsetDeleteRequestTopic)

    req = OffsetDeleteRequest(group_id=group, topics=tuple(
        OffsetDeleteRequestTopic(name=t, partitions=tuple(OffsetDeleteRequestPartition(partition_index=i32(p))
                                                          for p in ps)) for t, ps in partitions.items()))
    coordinator = _coordinator(bootstrap, group)
    with kafka_wire.connect(coordinator) as conn:
        resp = conn.request(req)
    return ErrorCode(resp.error_code), {(t.name, int(p.partition_index)): ErrorCode(p.error_code)
                                        for t in resp.topics for p in t.partitions}


def _coordinator(bootstrap: str, group: str) -> str:
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest

    with kafka_wire.connect(bootstrap) as conn:
        def found():
            r = conn.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,)))
            c = r.coordinators[0]
            return f"{c.host}:{c.port}" if c.error_code == ErrorCode.none else None
        return wait_for(f"a coordinator for group {group}", found, timeout=30)


def test_kafka_consumer_groups_delete_offsets_tool(broker):
    """The tool's deletion is written to __consumer_offsets: gone after a restart too."""
    b = broker.bootstrap
    topic = make_topic(b, "offdel", partitions=2, records=10)
    group = kafka_wire.unique_topic("offdel-group")
    _commit(b, group, {(topic, 0): 3, (topic, 1): 4})
    out = run_tool("consumer.group.ConsumerGroupCommand", "--bootstrap-server", b, "--delete-offsets",
                   "--group", group, "--topic", f"{topic}:0")
    assert f"Request succeeded for deleting offsets from group {group}" in out, out
    assert [line.split() for line in out.splitlines() if line.startswith(topic)] == [[topic, "0", "Successful"]], out
    assert _committed(b, group, [(topic, 0), (topic, 1)]) == {(topic, 0): -1001, (topic, 1): 4}
    broker.restart()
    assert _committed(b, group, [(topic, 0), (topic, 1)]) == {(topic, 0): -1001, (topic, 1): 4}


def test_delete_offsets_of_an_active_group(shared_broker):
    """kafka-python's delete_group_offsets (confluent-kafka's AdminClient has no OffsetDelete): a
    topic the active group consumes answers GROUP_SUBSCRIBED_TO_TOPIC; another topic's offsets of
    the same group go."""
    from confluent_kafka import Consumer, TopicPartition
    from kafka import KafkaAdminClient
    from kafka import TopicPartition as KpTopicPartition
    from kafka.errors import GroupSubscribedToTopicError, NoError

    b = shared_broker.bootstrap
    consumed = make_topic(b, "offdel-sub", records=5)
    other = make_topic(b, "offdel-other")
    group = kafka_wire.unique_topic("offdel-active")
    c = Consumer({"bootstrap.servers": b, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "session.timeout.ms": 30000})
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=30000)
    try:
        c.subscribe([consumed])
        wait_for(f"{group} to be assigned {consumed}", lambda: c.poll(0.5) is not None and bool(c.assignment()),
                 timeout=60, interval=0)
        c.commit(offsets=[TopicPartition(consumed, 0, 2), TopicPartition(other, 0, 7)], asynchronous=False)
        result = admin.delete_group_offsets(group, [KpTopicPartition(consumed, 0), KpTopicPartition(other, 0)])
        assert result == {KpTopicPartition(consumed, 0): GroupSubscribedToTopicError,
                          KpTopicPartition(other, 0): NoError}, result
        assert _committed(b, group, [(consumed, 0), (other, 0)]) == {(consumed, 0): 2, (other, 0): -1001}
    finally:
        admin.close()
        c.close()


def test_offset_delete_per_item_errors(shared_broker):
    b = shared_broker.bootstrap
    topic = make_topic(b, "offdel-bad", partitions=2)
    group = kafka_wire.unique_topic("offdel-bad-group")
    _commit(b, group, {(topic, 0): 1})
    top, parts = _wire_offset_delete(b, group, {topic: [0, 1, 5], "no-such-topic-offdel": [0]})
    assert top == ErrorCode.none
    assert parts == {(topic, 0): ErrorCode.none, (topic, 1): ErrorCode.none,
                     (topic, 5): ErrorCode.unknown_topic_or_partition,
                     ("no-such-topic-offdel", 0): ErrorCode.unknown_topic_or_partition}
    missing = kafka_wire.unique_topic("no-such-group")
    assert _wire_offset_delete(b, missing, {topic: [0]}) == (ErrorCode.group_id_not_found, {})


# -- DescribeQuorum ------------------------------------------------------------------------------

def test_kafka_metadata_quorum_tool_names_the_leader(shared_broker):
    b = shared_broker.bootstrap
    with kafka_wire.connect(b) as conn:
        node_ids = {int(n.node_id) for n in conn.metadata([]).brokers}
    out = run_tool("MetadataQuorumCommand", "--bootstrap-server", b, "describe", "--status")
    fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
    assert int(fields["LeaderId"]) in node_ids, out
    assert int(fields["LeaderEpoch"]) >= 1, out
    assert re.search(rf'"id": {int(fields["LeaderId"])}\b', fields["CurrentVoters"]), out
    out = run_tool("MetadataQuorumCommand", "--bootstrap-server", b, "describe", "--replication")
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    assert any(r[0] == fields["LeaderId"].strip() and r[-1] == "Leader" for r in rows), out


def test_kafka_python_describe_metadata_quorum(shared_broker):
    from kafka import KafkaAdminClient

    b = shared_broker.bootstrap
    with kafka_wire.connect(b) as conn:
        node_ids = {int(n.node_id) for n in conn.metadata([]).brokers}
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=30000)
    try:
        quorum = admin.describe_metadata_quorum()
    finally:
        admin.close()
    [topic] = quorum["topics"]
    [partition] = topic["partitions"]
    assert topic["topic_name"] == "__cluster_metadata" and partition["error"] is None, quorum
    assert partition["leader_id"] in node_ids, quorum
    assert partition["leader_id"] in {v["replica_id"] for v in partition["current_voters"]}, quorum
    assert {n["node_id"] for n in quorum["nodes"]} >= {partition["leader_id"]}, quorum


def test_describe_quorum_of_another_partition(shared_broker):
    from kio.schema.describe_quorum.v2.request import DescribeQuorumRequest, PartitionData, TopicData

    req = DescribeQuorumRequest(topics=(TopicData(topic_name="__cluster_metadata",
                                                  partitions=(PartitionData(partition_index=i32(3)),)),))
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        resp = conn.request(req)
    assert resp.error_code == ErrorCode.none, resp
    assert [(t.topic_name, int(p.partition_index), ErrorCode(p.error_code)) for t in resp.topics for p in t.partitions] \
        == [("__cluster_metadata", 3, ErrorCode.unknown_topic_or_partition)], resp


# -- DescribeTopicPartitions ---------------------------------------------------------------------

def test_kafka_topics_describe_pages_through_partitions(shared_broker):
    """kafka-topics.sh --describe uses DescribeTopicPartitions (it prints the ELR columns only then);
    a limit of 2 partitions per answer makes it follow the cursor."""
    b = shared_broker.bootstrap
    topic = make_topic(b, "dtp-tool", partitions=5)
    out = run_tool("TopicCommand", "--bootstrap-server", b, "--describe", "--topic", topic,
                   "--partition-size-limit-per-response", "2")
    rows = [line for line in out.splitlines() if "\tPartition: " in line]
    assert [int(r.split("Partition: ")[1].split()[0]) for r in rows] == [0, 1, 2, 3, 4], out
    assert all("Elr: " in r and "LastKnownElr: " in r for r in rows), out
    assert "PartitionCount: 5" in out, out


def _describe_page(bootstrap: str, names: list[str], limit: int, cursor: tuple[str, int] | None = None):
    from kio.schema.describe_topic_partitions.v0.request import Cursor, DescribeTopicPartitionsRequest, TopicRequest

    req = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=n) for n in names), response_partition_limit=i32(limit),
        cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=i32(cursor[1])))
    with kafka_wire.connect(bootstrap) as conn:
        return conn.request(req)


def _rows(resp) -> list[tuple[str, int]]:
    return [(t.name, int(p.partition_index)) for t in resp.topics for p in t.partitions]


def test_describe_topic_partitions_cursor(shared_broker):
    b = shared_broker.bootstrap
    first = make_topic(b, "dtp-a", partitions=3)
    second = first.replace("dtp-a", "dtp-b")
    with kafka_wire.connect(b) as conn:
        assert conn.create_topic(second, 2) == ErrorCode.none
    names = [second, first]  # answered in name order
    page1 = _describe_page(b, names, 2)
    assert _rows(page1) == [(first, 0), (first, 1)]
    assert (page1.next_cursor.topic_name, int(page1.next_cursor.partition_index)) == (first, 2)
    page2 = _describe_page(b, names, 2, (first, 2))
    assert _rows(page2) == [(first, 2), (second, 0)]
    assert (page2.next_cursor.topic_name, int(page2.next_cursor.partition_index)) == (second, 1)
    page3 = _describe_page(b, names, 2, (second, 1))
    assert _rows(page3) == [(second, 1)] and page3.next_cursor is None
    p = page1.topics[0].partitions[0]
    assert p.error_code == ErrorCode.none and p.leader_id == p.replica_nodes[0] and p.isr_nodes == p.replica_nodes
    assert p.eligible_leader_replicas == () and p.offline_replicas == ()
    exact = _describe_page(b, [first, second], 3)  # the limit runs out at a topic's end
    assert _rows(exact) == [(first, 0), (first, 1), (first, 2)]
    assert (exact.next_cursor.topic_name, int(exact.next_cursor.partition_index)) == (second, 0)


def test_kafka_python_describe_topic_partitions(shared_broker):
    from kafka import KafkaAdminClient

    b = shared_broker.bootstrap
    topic = make_topic(b, "dtp-kp", partitions=3)
    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=30000)
    try:
        first = admin.describe_topic_partitions([topic], response_partition_limit=2)
        rest = admin.describe_topic_partitions([topic], cursor=first["next_cursor"])
    finally:
        admin.close()
    assert first["next_cursor"] == {"topic_name": topic, "partition_index": 2}, first
    assert [p["partition_index"] for t in (first, rest) for p in t["topics"][0]["partitions"]] == [0, 1, 2]
    assert rest["next_cursor"] is None, rest


def test_describe_topic_partitions_bad_input(shared_broker):
    b = shared_broker.bootstrap
    topic = make_topic(b, "dtp-bad")
    resp = _describe_page(b, [topic, "no-such-topic-dtp", "bad name!"], 100)
    errors = {t.name: ErrorCode(t.error_code) for t in resp.topics}
    assert errors == {topic: ErrorCode.none, "no-such-topic-dtp": ErrorCode.unknown_topic_or_partition,
                      "bad name!": ErrorCode.invalid_topic_exception}, resp
    refused = _describe_page(b, [topic], 100, ("zz-not-listed", 0))
    assert [(t.name, ErrorCode(t.error_code)) for t in refused.topics] == [(topic, ErrorCode.invalid_request)]


# -- ListConfigResources, ApiVersions ------------------------------------------------------------

def test_list_config_resources(shared_broker):
    from kio.schema.list_config_resources.v1.request import ListConfigResourcesRequest

    b = shared_broker.bootstrap
    topic = make_topic(b, "lcr")
    with kafka_wire.connect(b) as conn:
        everything = conn.request(ListConfigResourcesRequest(resource_types=()))
        topics_only = conn.request(ListConfigResourcesRequest(resource_types=(i8(2),)))
        node_ids = {str(int(n.node_id)) for n in conn.metadata([]).brokers}
    assert everything.error_code == ErrorCode.none
    listed = {(r.resource_name, int(r.resource_type)) for r in everything.config_resources}
    assert (topic, 2) in listed and {(n, 4) for n in node_ids} <= listed and {(n, 8) for n in node_ids} <= listed
    assert {int(r.resource_type) for r in topics_only.config_resources} == {2}
    assert topic in {r.resource_name for r in topics_only.config_resources}

    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=b, request_timeout_ms=30000)
    try:
        by_type = admin.list_config_resources(["TOPIC", "BROKER"])
    finally:
        admin.close()
    assert topic in by_type["topic"] and set(by_type["broker"]) == node_ids and set(by_type) == {"topic", "broker"}, by_type


def test_kafka_python_takes_the_broker_for_kafka_4_1(shared_broker):
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=10000)
    try:
        probed = consumer.config["api_version"]
    finally:
        consumer.close()
    assert tuple(probed) == (4, 1), f"kafka-python took the broker for Kafka {probed}"


def test_produce_v13_names_topics_by_id(shared_broker):
    """Produce v13 (KIP-516), which Kafka 4.1 clients send: topics by id in request and answer;
    an unknown id answers UNKNOWN_TOPIC_ID."""
    import datetime
    import uuid

    from kio.schema.produce.v13.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.static.primitive import i16

    b = shared_broker.bootstrap
    topic = make_topic(b, "produce-v13")
    with kafka_wire.connect(b) as conn:
        topic_id = conn.metadata([topic]).topics[0].topic_id
        stranger = uuid.uuid4()
        req = ProduceRequest(transactional_id=None, acks=i16(-1), timeout=datetime.timedelta(seconds=10), topic_data=tuple(
            TopicProduceData(topic_id=tid, partition_data=(PartitionProduceData(
                index=i32(0), records=kafka_wire.build_batch([(None, b"by-id")])),)) for tid in (topic_id, stranger)))
        resp = conn.request(req)
    answers = {t.topic_id: ErrorCode(t.partition_responses[0].error_code) for t in resp.responses}
    assert answers == {topic_id: ErrorCode.none, stranger: ErrorCode.unknown_topic_id}, resp
    with kafka_wire.connect(b) as conn:
        assert conn.list_offsets(topic, 0, -1) == 1
