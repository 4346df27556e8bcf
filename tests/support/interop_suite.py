"""The interop scenarios, written once; each tests/e2e/test_interop_<client>.py subclasses
`InteropSuite` and names its client family.

Topics are created over the raw wire (flotilla.testenv.kafka_wire) when a scenario is not about
topic creation, so a client's admin API is only exercised by the admin test. Every wait is bounded.
"""

from __future__ import annotations

import collections

import pytest

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess, free_port
from tests.support.clients import (
    CODECS,
    Family,
    Rec,
    family,
    keyed_records,
    murmur2_partition,
    new_group,
    pump_all,
)
from tests.support.fault_proxy import FaultProxy
from tests.support.verify import read_all
from flotilla.testenv.waiting import wait_for


def make_topic(broker: ServerProcess, partitions: int, prefix: str = "t") -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(broker.bootstrap) as conn:
        code = conn.create_topic(topic, partitions)
    assert int(code) == 0, f"CreateTopics {topic}: error {code!r}"
    return topic


def partition_count(broker: ServerProcess, topic: str) -> int:
    with kafka_wire.connect(broker.bootstrap) as conn:
        md = conn.metadata([topic])
    t = md.topics[0]
    assert int(t.error_code) == 0, f"metadata for {topic}: {t.error_code!r}"
    return len(t.partitions)


def check_round_trip(sent: list[tuple[str, str]], delivered: list[Rec], consumed: list[Rec], partitions: int, reports_offsets: bool) -> None:
    """Keys, values, partition-by-key and offsets of what came back match what was sent."""
    assert sorted((r.key, r.value) for r in consumed) == sorted(sent), "consumed records differ from produced ones"
    for r in consumed:
        assert r.partition == murmur2_partition(r.key, partitions), f"{r} not in the key's murmur2 partition"
    by_partition: dict[int, list[Rec]] = collections.defaultdict(list)
    for r in consumed:
        by_partition[r.partition].append(r)
    for p, recs in by_partition.items():
        offsets = [r.offset for r in recs]
        assert offsets == list(range(len(recs))), f"partition {p}: offsets {offsets[:10]}... not 0..{len(recs) - 1}"
    # Per key, consumption order is production order.
    sent_order: dict[str, list[str]] = collections.defaultdict(list)
    for k, v in sent:
        sent_order[k].append(v)
    got_order: dict[str, list[str]] = collections.defaultdict(list)
    for r in sorted(consumed, key=lambda r: (r.partition, r.offset)):
        got_order[r.key].append(r.value)
    assert got_order == sent_order, "per-key order changed"
    if reports_offsets:
        assert sorted(delivered) == sorted(consumed), "delivery reports (partition, offset) differ from consumed records"


class InteropSuite:
    """Scenarios every client family must pass. Subclasses set `family_name`."""

    family_name = "?"

    @pytest.fixture
    def client(self) -> Family:
        return family(self.family_name)

    # -- topics -------------------------------------------------------------------------------------

    @pytest.mark.timeout(120)
    def test_create_topic(self, client: Family, shared_broker: ServerProcess) -> None:
        topic = kafka_wire.unique_topic("created")
        if client.has_admin:
            client.create_topic(shared_broker.bootstrap, topic, 3)
            expected = 3
        else:
            # No admin API: the broker creates the topic on first use (auto.create.topics.enable).
            client.produce(shared_broker.bootstrap, topic, [("k", "first")])
            expected = 1
        # Kafka's Metadata is eventually consistent: a topic just created may be listed a moment later.
        wait_for(f"{topic} listed by the client", lambda: topic in client.list_topics(shared_broker.bootstrap),
                 timeout=30)
        wait_for(f"{topic} with {expected} partitions in Metadata", lambda: partition_count(shared_broker, topic),
                 until=lambda n: n == expected, timeout=30)

    @pytest.mark.timeout(120)
    def test_list_topics(self, client: Family, shared_broker: ServerProcess) -> None:
        a = make_topic(shared_broker, 1, "list-a")
        b = make_topic(shared_broker, 2, "list-b")
        topics = client.list_topics(shared_broker.bootstrap)
        assert {a, b} <= topics
        # Internal topics may be listed (Kafka's Metadata includes them), but must be flagged.
        with kafka_wire.connect(shared_broker.bootstrap) as conn:
            for t in conn.metadata(None).topics:
                if t.name.startswith("__"):
                    assert t.is_internal, f"{t.name} is not flagged internal"

    # -- produce / consume -----------------------------------------------------------------------------

    @pytest.mark.timeout(180)
    @pytest.mark.parametrize("codec", CODECS)
    def test_keyed_produce_with_compression(self, client: Family, shared_broker: ServerProcess, codec: str) -> None:
        partitions = 4
        topic = make_topic(shared_broker, partitions, f"codec-{codec}")
        sent = keyed_records(300, keys=11, prefix=codec, size=120)
        delivered = client.produce(shared_broker.bootstrap, topic, sent, compression=codec, acks="all")
        assert len(delivered) == len(sent)
        with client.consumer(shared_broker.bootstrap, topic, offset_reset="earliest") as c:
            consumed = c.take(len(sent))
            c.settle(1.0)
            consumed = list(c.records)
        check_round_trip(sent, delivered, consumed, partitions, client.reports_offsets)

    @pytest.mark.timeout(120)
    def test_consume_from_earliest(self, client: Family, shared_broker: ServerProcess) -> None:
        topic = make_topic(shared_broker, 2, "earliest")
        sent = keyed_records(40, keys=5, prefix="early")
        delivered = client.produce(shared_broker.bootstrap, topic, sent)
        with client.consumer(shared_broker.bootstrap, topic, offset_reset="earliest") as c:
            c.take(len(sent))
            c.settle(1.0)
            consumed = list(c.records)
        check_round_trip(sent, delivered, consumed, 2, client.reports_offsets)

    @pytest.mark.timeout(120)
    def test_consume_from_latest(self, client: Family, shared_broker: ServerProcess) -> None:
        topic = make_topic(shared_broker, 2, "latest")
        old = keyed_records(20, keys=5, prefix="old")
        client.produce(shared_broker.bootstrap, topic, old)
        with client.consumer(shared_broker.bootstrap, topic, offset_reset="latest") as c:
            c.wait_ready()
            new = keyed_records(15, keys=5, prefix="new")
            client.produce(shared_broker.bootstrap, topic, new)
            c.take(len(new))
            c.settle(1.0)
            got = list(c.records)
        assert sorted((r.key, r.value) for r in got) == sorted(new), "latest consumer saw old records or lost new ones"
        with kafka_wire.connect(shared_broker.bootstrap) as conn:
            old_end = {p: 0 for p in range(2)}
            for k, _ in old:
                old_end[murmur2_partition(k, 2)] += 1
            for p in range(2):
                assert conn.list_offsets(topic, p) == old_end[p] + sum(1 for k, _ in new if murmur2_partition(k, 2) == p)
        for r in got:
            assert r.offset >= old_end[r.partition], f"{r} is older than the position at subscribe time"

    @pytest.mark.timeout(180)
    def test_reads_batches_written_by_other_clients(self, client: Family, shared_broker: ServerProcess) -> None:
        """The broker stores batches as producers wrote them; every consumer must read every
        producer's framing and codec from one partition."""
        topic = make_topic(shared_broker, 1, "mixed")
        writers = [("confluent", "zstd"), ("kafka-python", "gzip"), ("aiokafka", "snappy"), ("confluent", "lz4")]
        sent: list[tuple[str, str]] = []
        for i, (writer, codec) in enumerate(writers):
            part = keyed_records(50, keys=3, prefix=f"{writer}-{codec}-{i}", size=90)
            family(writer).produce(shared_broker.bootstrap, topic, part, compression=codec)
            sent += part
        with client.consumer(shared_broker.bootstrap, topic, offset_reset="earliest") as c:
            c.take(len(sent))
            c.settle(1.0)
            got = list(c.records)
        assert [(r.key, r.value) for r in got] == sent, "records differ or arrive out of order"
        assert [r.offset for r in got] == list(range(len(sent)))

    @pytest.mark.timeout(120)
    def test_large_record(self, client: Family, shared_broker: ServerProcess) -> None:
        topic = make_topic(shared_broker, 1, "large")
        big = "L" * 700_000
        sent = [("key-big", big), ("key-small", "after")]
        client.produce(shared_broker.bootstrap, topic, sent)
        with client.consumer(shared_broker.bootstrap, topic, offset_reset="earliest") as c:
            got = c.take(2)
        assert [(r.key, len(r.value or "")) for r in got] == [("key-big", 700_000), ("key-small", 5)]
        assert got[0].value == big

    # -- groups -----------------------------------------------------------------------------------------

    @pytest.mark.timeout(180)
    def test_consumer_group_rebalance(self, client: Family, shared_broker: ServerProcess) -> None:
        partitions = 6
        topic = make_topic(shared_broker, partitions, "group")
        group = new_group()
        everything = set(range(partitions))
        members = [client.consumer(shared_broker.bootstrap, topic, group=group) for _ in range(3)]
        try:

            def balanced(ms: list) -> bool:
                sets = [m.assignment() for m in ms]
                union = set().union(*sets)
                return all(sets) and union == everything and sum(len(s) for s in sets) == partitions

            pump_all(members, lambda: balanced(members), 90, "3 members to share all partitions")
            sets = [m.assignment() for m in members]
            for i, s in enumerate(sets):
                for j in range(i + 1, len(sets)):
                    assert not (s & sets[j]), f"partition assigned twice: {sets}"
            leaving, rest = members[0], members[1:]
            leaving.close()
            members = rest
            pump_all(rest, lambda: balanced(rest), 90, "2 remaining members to take over all partitions")
            a, b = (m.assignment() for m in rest)
            assert a | b == everything and not (a & b), f"after leave: {a} {b}"
        finally:
            for m in members:
                try:
                    m.close()
                except Exception:
                    pass

    @pytest.mark.timeout(240)
    def test_committed_offsets_survive_restart(self, client: Family, broker: ServerProcess) -> None:
        topic = make_topic(broker, 1, "commit")
        group = new_group()
        sent = keyed_records(20, keys=3, prefix="c")
        client.produce(broker.bootstrap, topic, sent)
        first = client.consume_and_commit(broker.bootstrap, topic, group, 10)
        assert [r.offset for r in first] == list(range(10))
        broker.restart()
        with client.consumer(broker.bootstrap, topic, group=group, offset_reset="earliest") as c:
            rest = c.take(10)
            c.settle(1.0)
            rest = list(c.records)
        assert [r.offset for r in rest] == list(range(10, 20)), "did not resume at the committed offset"
        assert [(r.key, r.value) for r in rest] == sent[10:]

    # -- idempotence --------------------------------------------------------------------------------------

    @pytest.mark.timeout(180)
    def test_idempotent_producer_no_duplicates(self, client: Family, shared_broker: ServerProcess) -> None:
        topic = make_topic(shared_broker, 3, "idem")
        sent = keyed_records(600, keys=13, prefix="idem")
        delivered = client.produce(shared_broker.bootstrap, topic, sent, idempotent=True, acks="all")
        assert len(delivered) == len(sent)
        with client.consumer(shared_broker.bootstrap, topic, offset_reset="earliest") as c:
            c.take(len(sent))
            c.settle(1.5)
            consumed = list(c.records)
        values = [r.value for r in consumed]
        assert len(values) == len(set(values)), "duplicates in the log"
        check_round_trip(sent, delivered, consumed, 3, client.reports_offsets)

    @pytest.mark.timeout(180)
    def test_idempotent_retries_after_lost_responses(self, client: Family, broker_factory) -> None:
        """The broker appends, the response is lost (proxy closes the connection), the client
        retries the same batches: the log must hold each record exactly once."""
        port = free_port()
        with FaultProxy(port, drop_produce_responses=3) as proxy:
            b = broker_factory(port=port, advertised_port=proxy.port)
            topic = make_topic(b, 2, "retry")
            sent = keyed_records(300, keys=9, prefix="retry")
            delivered = client.produce(f"127.0.0.1:{proxy.port}", topic, sent, idempotent=True, acks="all")
            assert proxy.dropped == 3, f"proxy dropped {proxy.dropped} Produce responses (of {proxy.produce_requests})"
            got = read_all(f"127.0.0.1:{proxy.port}", topic, (0, 1))
        values = [r.value for r in got]
        assert len(values) == len(set(values)), f"{len(values) - len(set(values))} duplicates after retries"
        check_round_trip(sent, delivered, got, 2, client.reports_offsets)


class AdminScenarios:
    """Admin APIs beyond CreateTopics, for families that have an admin client (not kcat)."""

    family_name = "?"

    @pytest.mark.timeout(180)
    def test_admin_topic_and_group_lifecycle(self, client: Family, shared_broker: ServerProcess) -> None:
        import time

        bootstrap = shared_broker.bootstrap
        topic = kafka_wire.unique_topic("admin")
        with kafka_wire.connect(bootstrap) as conn:
            assert int(conn.create_topic(topic, 2, {"retention.ms": "123456"})) == 0
        # DescribeConfigs: the topic's own setting and a default.
        config = client.topic_config(bootstrap, topic)
        assert config.get("retention.ms") == "123456", f"retention.ms = {config.get('retention.ms')!r}"
        assert config.get("cleanup.policy") == "delete"
        # CreatePartitions
        client.create_partitions(bootstrap, topic, 5)
        # Kafka answers once its controller committed the change; a broker's Metadata follows shortly after.
        wait_for(f"{topic} with 5 partitions in Metadata", lambda: partition_count(shared_broker, topic),
                 until=lambda n: n == 5, timeout=30)
        # ListGroups / DescribeGroups / DeleteGroups on a group with a committed offset.
        group = new_group()
        family("confluent").produce(bootstrap, topic, [("key-1", "for-the-group")])
        family("confluent").consume_and_commit(bootstrap, topic, group, 1)
        assert group in client.list_groups(bootstrap)
        assert client.group_state(bootstrap, group) == "empty"
        try:
            client.delete_group(bootstrap, group)
        except NotImplementedError:
            pass  # this client cannot delete groups
        else:
            assert group not in client.list_groups(bootstrap), "deleted group still listed"
        # DeleteTopics
        client.delete_topic(bootstrap, topic)
        deadline = time.monotonic() + 20
        while topic in client.list_topics(bootstrap):
            assert time.monotonic() < deadline, f"{topic} still listed 20s after DeleteTopics"
            time.sleep(0.5)
