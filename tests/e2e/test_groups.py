"""Consumer groups (classic protocol) end to end: real clients and raw requests of every version
against a broker child process.

Brokers here run with `group.initial.rebalance.delay.ms=0` and 4 `__consumer_offsets`
partitions, on free loopback ports (flotilla.testenv.brokers.broker_process).
"""

from __future__ import annotations

import datetime
import importlib
import struct
import time
import uuid
from typing import Any, Callable

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka.admin import AdminClient  # noqa: E402

SETTINGS = {"offsets.topic.num.partitions": "4", "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000"}


@pytest.fixture
def gbroker(broker_factory) -> ServerProcess:
    """A broker of its own (for tests that restart it)."""
    return broker_factory(dict(SETTINGS))


@pytest.fixture(scope="module")
def mbroker(kafka_target, tmp_path_factory) -> Any:
    """One broker for the tests that each use their own topic and group."""
    from tests.support.pytest_plugin import make_broker

    b = make_broker(kafka_target, tmp_path_factory.mktemp("groups-broker"), dict(SETTINGS))
    b.start()
    try:
        yield b
    finally:
        b.close()


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


def make_topic(b: ServerProcess, partitions: int) -> str:
    topic = kafka_wire.unique_topic("grp")
    with kafka_wire.connect(b.bootstrap) as conn:
        assert conn.create_topic(topic, partitions) == ErrorCode.none
    return topic


def produce(b: ServerProcess, topic: str, n: int, partition: int | None = None) -> None:
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(n):
        if partition is None:
            p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode())
        else:
            p.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=partition)
    assert p.flush(30) == 0


class Member:
    """A confluent-kafka consumer that records its assignment and rebalance callbacks."""

    def __init__(self, b: ServerProcess, topic: str, group: str, **extra: Any) -> None:
        conf = {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "enable.auto.commit": False, "session.timeout.ms": 10000, "heartbeat.interval.ms": 500,
                "topic.metadata.refresh.interval.ms": 2000}
        conf.update(extra)
        self.c = ck.Consumer(conf)
        self.assigned: set[int] = set()
        self.assigns = 0
        self.revokes = 0
        self.records: list[Any] = []
        self.c.subscribe([topic], on_assign=self._on_assign, on_revoke=self._on_revoke)

    def _on_assign(self, _c: Any, _parts: list[Any]) -> None:
        self.assigns += 1  # the binding (incrementally) assigns after the callback

    def _on_revoke(self, _c: Any, _parts: list[Any]) -> None:
        self.revokes += 1

    def pump(self) -> None:
        msg = self.c.poll(0.1)
        while msg is not None:
            if msg.error() is None:
                self.records.append(msg)
            msg = self.c.poll(0)
        self.assigned = {tp.partition for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


def pump_until(members: list[Member], cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for m in members:
            m.pump()
        if cond():
            return
    raise AssertionError(f"timed out after {timeout}s waiting for {what}: {[m.assigned for m in members]}")


def covers(members: list[Member], partitions: int) -> bool:
    sets = [m.assigned for m in members]
    return all(sets) and set().union(*sets) == set(range(partitions)) and sum(map(len, sets)) == partitions


def close_all(members: list[Member]) -> None:
    for m in members:
        try:
            m.close()
        except Exception:
            pass


# -- real clients ---------------------------------------------------------------------------------


@pytest.mark.timeout(180)
@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_three_members_share_partitions_then_two_take_over(mbroker, strategy):
    topic = make_topic(mbroker, 6)
    group = new_group()
    members = [Member(mbroker, topic, group, **{"partition.assignment.strategy": strategy}) for _ in range(3)]
    try:
        pump_until(members, lambda: covers(members, 6), 60, "three members to share six partitions")
        sets = [m.assigned for m in members]
        assert all(len(s) == 2 for s in sets), sets  # 2 each, no overlap
        members[0].close()
        rest = members[1:]
        members = rest
        pump_until(rest, lambda: covers(rest, 6), 60, "two members to take over all partitions")
        a, b = rest[0].assigned, rest[1].assigned
        assert not (a & b) and len(a) == len(b) == 3
    finally:
        close_all(members)


@pytest.mark.timeout(180)
def test_committed_offset_resumes_after_broker_restart(gbroker):
    topic = make_topic(gbroker, 1)
    group = new_group()
    produce(gbroker, topic, 20, partition=0)
    m = Member(gbroker, topic, group)
    try:
        pump_until([m], lambda: len(m.records) >= 10, 60, "ten records")
        tenth = m.records[9]
        m.c.commit(offsets=[ck.TopicPartition(topic, 0, tenth.offset() + 1)], asynchronous=False)
    finally:
        m.close()
    gbroker.restart()
    with kafka_wire.connect(gbroker.bootstrap) as conn:
        from kio.schema.offset_fetch.v8.request import (
            OffsetFetchRequest, OffsetFetchRequestGroup, OffsetFetchRequestTopics)

        req = OffsetFetchRequest(require_stable=False, groups=(OffsetFetchRequestGroup(
            group_id=group, topics=(OffsetFetchRequestTopics(name=topic, partition_indexes=(0,)),)),))
        deadline = time.monotonic() + 30
        resp = conn.request(req)
        while resp.groups[0].error_code == ErrorCode.coordinator_load_in_progress and time.monotonic() < deadline:
            time.sleep(0.2)
            resp = conn.request(req)
        assert resp.groups[0].error_code == ErrorCode.none
        assert resp.groups[0].topics[0].partitions[0].committed_offset == 10
    again = Member(gbroker, topic, group)
    try:
        pump_until([again], lambda: len(again.records) >= 10, 60, "the other ten records")
        time.sleep(0.5)
        again.pump()
        assert [r.offset() for r in again.records] == list(range(10, 20))
    finally:
        again.close()


@pytest.mark.timeout(180)
def test_static_member_rejoins_without_rebalance(mbroker):
    topic = make_topic(mbroker, 4)
    group = new_group()
    static = {"session.timeout.ms": 30000}
    a = Member(mbroker, topic, group, **{"group.instance.id": "instance-a"}, **static)
    b = Member(mbroker, topic, group, **{"group.instance.id": "instance-b"}, **static)
    members = [a, b]
    try:
        pump_until(members, lambda: covers(members, 4), 60, "two static members to share four partitions")
        a_parts, b_parts, b_assigns, b_revokes = set(a.assigned), set(b.assigned), b.assigns, b.revokes
        before = describe(mbroker, group)
        a.close()  # a static member leaves no LeaveGroup behind (KIP-345)
        members = [b]
        a2 = Member(mbroker, topic, group, **{"group.instance.id": "instance-a"}, **static)
        members = [a2, b]
        pump_until(members, lambda: a2.assigned == a_parts, 60, "the restarted instance to get its partitions back")
        for _ in range(20):  # give a rebalance, if one were coming, time to show
            for m in members:
                m.pump()
        assert (b.assigns, b.revokes, b.assigned) == (b_assigns, b_revokes, b_parts), "the other member rebalanced"
        after = describe(mbroker, group)
        assert after.group_state == "Stable"
        ids_before = {m.group_instance_id: m.member_id for m in before.members}
        ids_after = {m.group_instance_id: m.member_id for m in after.members}
        assert ids_after["instance-b"] == ids_before["instance-b"]
        assert ids_after["instance-a"] != ids_before["instance-a"]  # same instance, new member id
    finally:
        close_all(members)


def describe(b: ServerProcess, group: str) -> Any:
    from kio.schema.describe_groups.v5.request import DescribeGroupsRequest

    with kafka_wire.connect(b.bootstrap) as conn:
        resp = conn.request(DescribeGroupsRequest(groups=(group,), include_authorized_operations=False))
    return resp.groups[0]


@pytest.mark.timeout(120)
def test_delete_groups_refuses_non_empty_group(mbroker):
    topic = make_topic(mbroker, 2)
    group = new_group()
    admin = AdminClient({"bootstrap.servers": mbroker.bootstrap})
    m = Member(mbroker, topic, group)
    try:
        pump_until([m], lambda: m.assigned == {0, 1}, 60, "the member's assignment")
        listed = admin.list_consumer_groups().result(30)
        assert group in {g.group_id for g in listed.valid}
        desc = admin.describe_consumer_groups([group])[group].result(30)
        assert len(desc.members) == 1
        with pytest.raises(ck.KafkaException) as err:
            admin.delete_consumer_groups([group])[group].result(30)
        assert err.value.args[0].code() == ck.KafkaError.NON_EMPTY_GROUP
    finally:
        m.close()
    admin.delete_consumer_groups([group])[group].result(30)
    listed = admin.list_consumer_groups().result(30)
    assert group not in {g.group_id for g in listed.valid}


# -- every version of every group API, over the wire -----------------------------------------------

_APIS = {  # name: (api key, min version, max version)
    "find_coordinator": (10, 0, 6), "join_group": (11, 0, 9), "sync_group": (14, 0, 5), "heartbeat": (12, 0, 4),
    "leave_group": (13, 0, 5), "offset_commit": (8, 2, 10), "offset_fetch": (9, 1, 10),
    "list_groups": (16, 0, 5), "describe_groups": (15, 0, 6), "delete_groups": (42, 0, 2),
}


def _kstr(s: str) -> bytes:
    return struct.pack(">h", len(s.encode())) + s.encode()


def consumer_subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0: the topics, no user data."""
    return struct.pack(">hi", 0, 1) + _kstr(topic) + struct.pack(">i", -1)


def consumer_assignment(topic: str, partitions: list[int]) -> bytes:
    """ConsumerProtocolAssignment v0: partitions of one topic, no user data."""
    return (struct.pack(">hi", 0, 1) + _kstr(topic) + struct.pack(">i", len(partitions))
            + b"".join(struct.pack(">i", p) for p in partitions) + struct.pack(">i", -1))


def _req(api: str, version: int, cls: str, **fields: Any) -> Any:
    module = importlib.import_module(f"kio.schema.{api}.v{version}.request")
    from broker.protocol.codec import build

    return build(getattr(module, cls), **fields)


_broker_ranges: dict[int, tuple[int, int]] = {}


def _v(api: str, profile: int) -> int:
    """Version `profile` of `api`, clamped to what both kio and the broker (ApiVersions) have."""
    key, lo, hi = _APIS[api]
    b_lo, b_hi = _broker_ranges.get(key, (lo, hi))
    lo, hi = max(lo, b_lo), min(hi, b_hi)
    return max(lo, min(profile, hi))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("profile", range(11))
def test_group_lifecycle_at_every_version(mbroker, profile):
    """Join, sync, heartbeat, commit, fetch, list, describe, leave and delete one group, each
    API at version min(profile, its max) (at least its min)."""
    group = new_group()
    topic = make_topic(mbroker, 1)
    ms = datetime.timedelta(milliseconds=1)
    with kafka_wire.connect(mbroker.bootstrap) as conn:
        _broker_ranges.update({int(k.api_key): (int(k.min_version), int(k.max_version))
                               for k in conn.api_versions().api_keys})
        for api, (key, lo, hi) in _APIS.items():
            assert _broker_ranges.get(key) is not None, f"broker does not serve {api}"
        v = _v("find_coordinator", profile)
        deadline = time.monotonic() + 30
        while True:  # Apache Kafka creates __consumer_offsets on the first FindCoordinator
            if v < 4:
                fc = conn.request(_req("find_coordinator", v, "FindCoordinatorRequest", key=group, key_type=0))
                answers = [(fc.error_code, fc.port)]
            else:
                fc = conn.request(_req("find_coordinator", v, "FindCoordinatorRequest", key_type=0,
                                       coordinator_keys=(group, group + "x")))
                answers = [(c.error_code, c.port) for c in fc.coordinators]
            if all(e != ErrorCode.coordinator_not_available for e, _ in answers) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert answers == [(ErrorCode.none, mbroker.port)] * (1 if v < 4 else 2)

        v = _v("join_group", profile)
        subscription = consumer_subscription(topic)
        proto = _req("join_group", v, "JoinGroupRequestProtocol", name="range", metadata=subscription)

        def join(member_id: str) -> Any:
            return conn.request(_req("join_group", v, "JoinGroupRequest", group_id=group, session_timeout=10000 * ms,
                                     rebalance_timeout=10000 * ms, member_id=member_id, group_instance_id=None,
                                     protocol_type="consumer", protocols=(proto,), reason=None))

        jr = join("")
        if v >= 4:
            assert jr.error_code == ErrorCode.member_id_required
            jr = join(jr.member_id)
        assert jr.error_code == ErrorCode.none
        member, gen = jr.member_id, jr.generation_id
        assert jr.leader == member and [m.member_id for m in jr.members] == [member]
        assert jr.members[0].metadata == subscription

        v = _v("sync_group", profile)
        assigned = consumer_assignment(topic, [0])
        assignment = _req("sync_group", v, "SyncGroupRequestAssignment", member_id=member, assignment=assigned)
        sr = conn.request(_req("sync_group", v, "SyncGroupRequest", group_id=group, generation_id=gen,
                               member_id=member, group_instance_id=None, protocol_type="consumer",
                               protocol_name="range", assignments=(assignment,)))
        assert (sr.error_code, sr.assignment) == (ErrorCode.none, assigned)

        v = _v("heartbeat", profile)
        hb = conn.request(_req("heartbeat", v, "HeartbeatRequest", group_id=group, generation_id=gen,
                               member_id=member, group_instance_id=None))
        assert hb.error_code == ErrorCode.none
        hb = conn.request(_req("heartbeat", v, "HeartbeatRequest", group_id=group, generation_id=gen + 1,
                               member_id=member, group_instance_id=None))
        assert hb.error_code == ErrorCode.illegal_generation

        v = _v("offset_commit", profile)
        topic_id = conn.metadata([topic]).topics[0].topic_id
        part = _req("offset_commit", v, "OffsetCommitRequestPartition", partition_index=0, committed_offset=42,
                    committed_leader_epoch=-1, committed_metadata="md", commit_timestamp=-1)
        oc = conn.request(_req("offset_commit", v, "OffsetCommitRequest", group_id=group,
                               generation_id_or_member_epoch=gen, member_id=member, group_instance_id=None,
                               retention_time=datetime.timedelta(milliseconds=-1), topics=(
                                   _req("offset_commit", v, "OffsetCommitRequestTopic", name=topic,
                                        topic_id=topic_id, partitions=(part,)),)))
        assert oc.topics[0].partitions[0].error_code == ErrorCode.none

        v = _v("offset_fetch", profile)
        if v < 8:
            of = conn.request(_req("offset_fetch", v, "OffsetFetchRequest", group_id=group, require_stable=False,
                                   topics=(_req("offset_fetch", v, "OffsetFetchRequestTopic", name=topic,
                                                partition_indexes=(0,)),)))
            parts = of.topics[0].partitions
        else:
            t = _req("offset_fetch", v, "OffsetFetchRequestTopics", name=topic, topic_id=topic_id,
                     partition_indexes=(0,))
            g = _req("offset_fetch", v, "OffsetFetchRequestGroup", group_id=group, member_id=None, member_epoch=-1,
                     topics=(t,))
            of = conn.request(_req("offset_fetch", v, "OffsetFetchRequest", groups=(g,), require_stable=False))
            parts = of.groups[0].topics[0].partitions
        assert (parts[0].committed_offset, parts[0].metadata, parts[0].error_code) == (42, "md", ErrorCode.none)

        v = _v("list_groups", profile)
        lg = conn.request(_req("list_groups", v, "ListGroupsRequest", states_filter=(), types_filter=()))
        listed = {g.group_id: g for g in lg.groups}
        assert listed[group].protocol_type == "consumer"
        if v >= 4:
            assert listed[group].group_state == "Stable"
            lg = conn.request(_req("list_groups", v, "ListGroupsRequest", states_filter=("Empty",), types_filter=()))
            assert group not in {g.group_id for g in lg.groups}

        v = _v("describe_groups", profile)
        dg = conn.request(_req("describe_groups", v, "DescribeGroupsRequest", groups=(group,),
                               include_authorized_operations=False))
        d = dg.groups[0]
        assert (d.error_code, d.group_state, d.protocol_type, d.protocol_data) == (
            ErrorCode.none, "Stable", "consumer", "range")
        assert [(m.member_id, m.member_metadata, m.member_assignment) for m in d.members] == [
            (member, subscription, assigned)]

        v = _v("delete_groups", profile)
        dl = conn.request(_req("delete_groups", v, "DeleteGroupsRequest", groups_names=(group,)))
        assert dl.results[0].error_code == ErrorCode.non_empty_group

        v = _v("leave_group", profile)
        if v < 3:
            lv = conn.request(_req("leave_group", v, "LeaveGroupRequest", group_id=group, member_id=member))
            assert lv.error_code == ErrorCode.none
        else:
            ident = _req("leave_group", v, "MemberIdentity", member_id=member, group_instance_id=None, reason=None)
            lv = conn.request(_req("leave_group", v, "LeaveGroupRequest", group_id=group, members=(ident,)))
            assert lv.error_code == ErrorCode.none and lv.members[0].error_code == ErrorCode.none

        v = _v("delete_groups", profile)
        dl = conn.request(_req("delete_groups", v, "DeleteGroupsRequest", groups_names=(group,)))
        assert dl.results[0].error_code == ErrorCode.none
        v = _v("describe_groups", profile)
        dg = conn.request(_req("describe_groups", v, "DescribeGroupsRequest", groups=(group,),
                               include_authorized_operations=False))
        assert dg.groups[0].group_state == "Dead"
        assert dg.groups[0].error_code == (ErrorCode.group_id_not_found if v >= 6 else ErrorCode.none)


# -- error semantics, checked against Apache Kafka too (--kafka-target=apache) ---------------------


class Wire:
    """Group requests at the newest version both sides have, one connection per member."""

    def __init__(self, b: ServerProcess, group: str, topic: str) -> None:
        self.conn = kafka_wire.connect(b.bootstrap)
        self.group = group
        self.topic = topic
        self.ms = datetime.timedelta(milliseconds=1)

    def join(self, member_id: str = "", instance: str | None = None, session_ms: int = 10000,
             rebalance_ms: int = 10000) -> Any:
        v = 9
        proto = _req("join_group", v, "JoinGroupRequestProtocol", name="range",
                     metadata=consumer_subscription(self.topic))
        return self.conn.request(_req("join_group", v, "JoinGroupRequest", group_id=self.group,
                                      session_timeout=session_ms * self.ms, rebalance_timeout=rebalance_ms * self.ms,
                                      member_id=member_id, group_instance_id=instance, protocol_type="consumer",
                                      protocols=(proto,), reason=None))

    def join_dynamic(self, **kw: Any) -> Any:
        first = self.join(**kw)
        assert first.error_code == ErrorCode.member_id_required
        return self.join(first.member_id, **kw)

    def sync(self, member_id: str, generation: int, assignments: dict[str, bytes] | None = None,
             instance: str | None = None) -> Any:
        v = 5
        a = tuple(_req("sync_group", v, "SyncGroupRequestAssignment", member_id=m, assignment=x)
                  for m, x in (assignments or {}).items())
        return self.conn.request(_req("sync_group", v, "SyncGroupRequest", group_id=self.group,
                                      generation_id=generation, member_id=member_id, group_instance_id=instance,
                                      protocol_type="consumer", protocol_name="range", assignments=a))

    def heartbeat(self, member_id: str, generation: int, instance: str | None = None) -> ErrorCode:
        return self.conn.request(_req("heartbeat", 4, "HeartbeatRequest", group_id=self.group,
                                      generation_id=generation, member_id=member_id,
                                      group_instance_id=instance)).error_code

    def commit(self, member_id: str, generation: int, offset: int = 1) -> ErrorCode:
        v = 8
        part = _req("offset_commit", v, "OffsetCommitRequestPartition", partition_index=0, committed_offset=offset,
                    committed_leader_epoch=-1, committed_metadata=None)
        resp = self.conn.request(_req("offset_commit", v, "OffsetCommitRequest", group_id=self.group,
                                      generation_id_or_member_epoch=generation, member_id=member_id,
                                      group_instance_id=None, topics=(
                                          _req("offset_commit", v, "OffsetCommitRequestTopic", name=self.topic,
                                               partitions=(part,)),)))
        return resp.topics[0].partitions[0].error_code

    def close(self) -> None:
        self.conn.close()


def _wait_coordinator(b: ServerProcess, group: str) -> None:
    with kafka_wire.connect(b.bootstrap) as conn:
        deadline = time.monotonic() + 30
        while True:
            fc = conn.request(_req("find_coordinator", 4, "FindCoordinatorRequest", key_type=0,
                                   coordinator_keys=(group,)))
            if fc.coordinators[0].error_code == ErrorCode.none or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert fc.coordinators[0].error_code == ErrorCode.none


@pytest.mark.timeout(120)
def test_error_semantics(mbroker):
    import concurrent.futures

    group = new_group()
    topic = make_topic(mbroker, 1)
    _wait_coordinator(mbroker, group)
    a, b, admin = Wire(mbroker, group, topic), Wire(mbroker, group, topic), Wire(mbroker, group, topic)
    try:
        assert a.join(session_ms=1).error_code == ErrorCode.invalid_session_timeout
        assert a.join(member_id="not-a-member").error_code == ErrorCode.unknown_member_id
        # A standalone commit (no generation, no member) is fine while the group has no members.
        assert admin.commit("", -1, offset=3) == ErrorCode.none
        ja = a.join_dynamic()
        assert ja.error_code == ErrorCode.none and ja.leader == ja.member_id
        assert a.sync(ja.member_id, ja.generation_id, {ja.member_id: consumer_assignment(topic, [0])}).error_code == 0
        assert admin.commit("", -1) == ErrorCode.unknown_member_id  # now only members may commit
        assert a.commit(ja.member_id, ja.generation_id + 1) == ErrorCode.illegal_generation
        assert a.commit(ja.member_id, ja.generation_id) == ErrorCode.none
        assert a.heartbeat("stranger", ja.generation_id) == ErrorCode.unknown_member_id
        # A second member joins: the first hears about it from its heartbeat and rejoins.
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            jb_future = pool.submit(b.join_dynamic)
            deadline = time.monotonic() + 20
            while a.heartbeat(ja.member_id, ja.generation_id) != ErrorCode.rebalance_in_progress:
                assert time.monotonic() < deadline, "no REBALANCE_IN_PROGRESS"
                time.sleep(0.1)
            ja2 = a.join(ja.member_id)
            jb = jb_future.result(30)
        assert ja2.generation_id == jb.generation_id == ja.generation_id + 1
        leader, follower = (ja2, jb) if ja2.leader == ja2.member_id else (jb, ja2)
        assert len(leader.members) == 2 and follower.members == ()
        # Commits with the new generation wait for the assignment: REBALANCE_IN_PROGRESS.
        assert a.commit(ja2.member_id, ja2.generation_id) == ErrorCode.rebalance_in_progress
        lw, fw = (a, b) if leader is ja2 else (b, a)
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            f_sync = pool.submit(fw.sync, follower.member_id, follower.generation_id)
            time.sleep(0.3)
            assert not f_sync.done(), "the follower's SyncGroup must wait for the leader's"
            l_sync = lw.sync(leader.member_id, leader.generation_id,
                             {leader.member_id: consumer_assignment(topic, [0]),
                              follower.member_id: consumer_assignment(topic, [])})
            assert l_sync.error_code == ErrorCode.none
            assert f_sync.result(10).assignment == consumer_assignment(topic, [])
        dl = admin.conn.request(_req("delete_groups", 2, "DeleteGroupsRequest", groups_names=(group, "no-such-group")))
        assert {r.group_id: r.error_code for r in dl.results} == {
            group: ErrorCode.non_empty_group, "no-such-group": ErrorCode.group_id_not_found}
    finally:
        for w in (a, b, admin):
            w.close()


@pytest.mark.timeout(120)
def test_static_member_fencing(mbroker):
    group = new_group()
    topic = make_topic(mbroker, 1)
    _wait_coordinator(mbroker, group)
    a = Wire(mbroker, group, topic)
    try:
        j1 = a.join(instance="inst")  # static members get their id at once (no MEMBER_ID_REQUIRED)
        assert j1.error_code == ErrorCode.none
        assert a.sync(j1.member_id, j1.generation_id, {j1.member_id: consumer_assignment(topic, [0])},
                      instance="inst").error_code == ErrorCode.none
        j2 = a.join(instance="inst")  # the instance restarted
        assert j2.error_code == ErrorCode.none
        assert j2.member_id != j1.member_id and j2.generation_id == j1.generation_id
        assert a.heartbeat(j1.member_id, j1.generation_id, instance="inst") == ErrorCode.fenced_instance_id
        assert a.heartbeat(j2.member_id, j2.generation_id, instance="inst") == ErrorCode.none
        s = a.sync(j2.member_id, j2.generation_id, instance="inst")
        assert (s.error_code, s.assignment) == (ErrorCode.none, consumer_assignment(topic, [0]))
        ident = _req("leave_group", 5, "MemberIdentity", member_id="", group_instance_id="inst", reason=None)
        lv = a.conn.request(_req("leave_group", 5, "LeaveGroupRequest", group_id=group, members=(ident,)))
        assert lv.members[0].error_code == ErrorCode.none
        assert describe(mbroker, group).group_state == "Empty"
    finally:
        a.close()


@pytest.mark.timeout(120)
def test_session_expiry_removes_silent_member(mbroker):
    group = new_group()
    topic = make_topic(mbroker, 1)
    _wait_coordinator(mbroker, group)
    a = Wire(mbroker, group, topic)
    try:
        j = a.join_dynamic(session_ms=1500)
        assert a.sync(j.member_id, j.generation_id, {j.member_id: b""}).error_code == ErrorCode.none
        assert describe(mbroker, group).group_state == "Stable"
        deadline = time.monotonic() + 20
        while describe(mbroker, group).group_state != "Empty":  # no heartbeats from here on
            assert time.monotonic() < deadline, "the silent member was never removed"
            time.sleep(0.2)
        assert a.heartbeat(j.member_id, j.generation_id) == ErrorCode.unknown_member_id
    finally:
        a.close()
