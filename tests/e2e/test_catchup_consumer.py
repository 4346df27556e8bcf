"""KIP-333 catch-up consumer (flotilla.catchup) against a real broker, in process: the KIP's two
crash examples, range tokens in the group's commit metadata, a partition's ranges moving to another
member in a rebalance, and the mode off behaving as a plain consumer.

A "crash" here is a consumer closed without committing what it processed: all that survives is the
group's committed offsets and metadata, as after kill -9 (test_catchup_kill9.py does the real thing).
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess
from flotilla.testenv.waiting import wait_for

ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import TopicPartition  # noqa: E402

from flotilla.catchup import CatchUpConsumer  # noqa: E402
from flotilla.catchup.ranges import TOKEN_PREFIX  # noqa: E402

SETTINGS = {"offsets.topic.num.partitions": "4", "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000"}


@pytest.fixture(scope="module")
def cbroker(kafka_target, tmp_path_factory) -> Any:
    from tests.support.pytest_plugin import make_broker

    b = make_broker(kafka_target, tmp_path_factory.mktemp("catchup-broker"), dict(SETTINGS))
    b.start()
    try:
        yield b
    finally:
        b.close()


def make_topic(b: ServerProcess, partitions: int = 1) -> str:
    topic = kafka_wire.unique_topic("cu")
    with kafka_wire.connect(b.bootstrap) as conn:
        assert conn.create_topic(topic, partitions) == ErrorCode.none
    return topic


def produce(b: ServerProcess, topic: str, start: int, end: int, partition: int = 0) -> None:
    p = ck.Producer({"bootstrap.servers": b.bootstrap, "acks": "all"})
    for i in range(start, end):
        p.produce(topic, value=str(i).encode(), partition=partition)
    assert p.flush(30) == 0


def consumer(b: ServerProcess, group: str, **extra: Any) -> CatchUpConsumer:
    conf = {"bootstrap.servers": b.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "enable.parallel.rebalance": True}
    conf.update(extra)
    return CatchUpConsumer(conf)


class Reader:
    """Polls a CatchUpConsumer, keeping every record in delivery order for the test to look at."""

    def __init__(self, c: CatchUpConsumer) -> None:
        self.c = c
        self.got: list[Any] = []

    def poll(self) -> None:
        msg = self.c.poll(0.1)
        if msg is not None:
            assert msg.error() is None, msg.error()
            self.got.append(msg)

    def until(self, what: str, check) -> Any:
        """Poll until check() is truthy; a timeout shows what the consumer had then."""
        def step():
            self.poll()
            return check() or (False, f"ranges {self.c.open_ranges()}, {len(self.got)} records,"
                                      f" last {[m.offset() for m in self.got][-10:]}")
        return wait_for(what, step, timeout=60, interval=0, until=lambda v: not (isinstance(v, tuple) and v[0] is False))

    def take(self, n: int, what: str) -> list[Any]:
        """The next n records delivered (already polled ones first)."""
        self.until(f"{n} records ({what})", lambda: len(self.got) >= n)
        out, self.got = self.got[:n], self.got[n:]
        return out


def take(c: CatchUpConsumer, n: int, what: str) -> list[Any]:
    return Reader(c).take(n, what)


def stored(b: ServerProcess, group: str, topic: str, partition: int = 0) -> TopicPartition:
    """The group's committed offset and metadata as a plain consumer reads them."""
    plain = ck.Consumer({"bootstrap.servers": b.bootstrap, "group.id": group})
    try:
        return plain.committed([TopicPartition(topic, partition)], timeout=30)[0]
    finally:
        plain.close()


def test_kip_examples_crash_at_100_then_at_170(cbroker):
    topic, group = make_topic(cbroker), f"g-{uuid.uuid4().hex[:8]}"
    produce(cbroker, topic, 0, 120)
    # A first life: processes up to 100 with 70 committed, then crashes.
    first = consumer(cbroker, group)
    first.subscribe([topic])
    msgs = take(first, 100, "first life")
    assert [m.offset() for m in msgs] == list(range(100))   # no gap: in order, like a plain consumer
    first.commit(message=msgs[69], asynchronous=False)
    assert first.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 70
    assert not first.child_consumer_is_alive()
    first.close()

    # Recovery with the log at 120: the primary starts at 120, the gap 70..119 is a range token.
    second = consumer(cbroker, group)
    second.subscribe([topic])
    r2 = Reader(second)
    r2.until("a range token after the first recovery", second.open_ranges)
    assert second.open_ranges() == {(topic, 0): [(70, 120, 70)]}
    token = stored(cbroker, group, topic)
    assert (token.offset, token.metadata) == (120, f"{TOKEN_PREFIX}70-120@70")
    produce(cbroker, topic, 120, 190)
    # Let the primary's fetch bring the fresh records in before the application polls again (its
    # cached high watermark moves with the fetch response that carries them); otherwise the gap,
    # prefetched earlier, could rightly be handed out whole before the fresh records even arrive.
    wait_for("the primary to fetch 120..189",
             lambda: second.get_watermark_offsets(TopicPartition(topic, 0), cached=True)[1],
             until=lambda high: high >= 190, timeout=60)
    got = r2.take(120, "gap 70..119 and fresh 120..189")
    by_offset = {m.offset(): m for m in got}
    assert sorted(by_offset) == list(range(70, 190)) and len(got) == 120
    assert second.child_consumer_is_alive()
    # Fresh records did not wait for the gap: some came before the gap's last record.
    order = [m.offset() for m in got]
    assert order.index(120) < order.index(119), order
    # Commit 70..89 of the gap and the fresh records up to 140; the rest is processed, not committed.
    second.commit(message=by_offset[89], asynchronous=False)
    second.commit(message=by_offset[139], asynchronous=False)
    assert second.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 90  # KIP rule
    token = stored(cbroker, group, topic)
    assert (token.offset, token.metadata) == (140, f"{TOKEN_PREFIX}70-120@90")
    second.close()   # the second crash with 140 committed, the log at 190

    third = consumer(cbroker, group)
    third.subscribe([topic])
    r3 = Reader(third)
    r3.until("two open ranges after the second recovery",
             lambda: len(third.open_ranges().get((topic, 0), [])) == 2)
    assert third.open_ranges() == {(topic, 0): [(70, 120, 90), (140, 190, 140)]}
    assert third.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 90
    got = r3.take(30 + 50, "both ranges")
    assert sorted(m.offset() for m in got) == list(range(90, 120)) + list(range(140, 190))
    # Ranges are read in order: all of the first before any of the second.
    offsets = [m.offset() for m in got]
    assert max(offsets[:30]) < 120 and min(offsets[30:]) >= 140
    for m in got:
        third.commit(message=m, asynchronous=False)
    assert third.open_ranges() == {}
    assert third.committed([TopicPartition(topic, 0)], timeout=30)[0].offset == 190
    token = stored(cbroker, group, topic)
    assert (token.offset, token.metadata or "") == (190, "")   # tokens removed when done
    third.close()


def test_ranges_move_with_a_partition_in_a_rebalance(cbroker):
    topic, group = make_topic(cbroker, 2), f"g-{uuid.uuid4().hex[:8]}"
    produce(cbroker, topic, 0, 50, partition=0)
    produce(cbroker, topic, 0, 50, partition=1)
    setup = consumer(cbroker, group)
    setup.subscribe([topic])
    take(setup, 20, "set-up")
    setup.commit(offsets=[TopicPartition(topic, 0, 10), TopicPartition(topic, 1, 20)], asynchronous=False)
    setup.close()
    produce(cbroker, topic, 50, 60, partition=0)
    produce(cbroker, topic, 50, 60, partition=1)

    a = consumer(cbroker, group)
    a.subscribe([topic])
    ra = Reader(a)
    ra.until("member a owning both partitions' ranges", lambda: len(a.open_ranges()) == 2)
    assert a.open_ranges() == {(topic, 0): [(10, 60, 10)], (topic, 1): [(20, 60, 20)]}
    a.pause([TopicPartition(topic, 0), TopicPartition(topic, 1)])  # a processes nothing more
    b = consumer(cbroker, group)
    b.subscribe([topic])

    def split():
        a.poll(0.05)
        b.poll(0.05)
        owned_a, owned_b = set(a.open_ranges()), set(b.open_ranges())
        return (len(owned_a) == 1 and len(owned_b) == 1 and not owned_a & owned_b) or (owned_a, owned_b)

    wait_for("one partition each", split, timeout=60, interval=0,
             until=lambda v: v is True)
    moved = next(iter(b.open_ranges()))
    assert b.open_ranges()[moved][0][:2] == ({0: (10, 60), 1: (20, 60)}[moved[1]])
    a.close()
    b.close()


def test_asynchronous_commits_are_coalesced_while_one_is_in_flight(cbroker):
    """An application committing every record asynchronously: while one commit is in flight the
    others fold into the next, which carries the newest state; the answers never go back, and the
    last one covers the last record with the range gone."""
    topic, group = make_topic(cbroker), f"g-{uuid.uuid4().hex[:8]}"
    produce(cbroker, topic, 0, 100)
    first = consumer(cbroker, group)
    first.subscribe([topic])
    first.commit(message=take(first, 50, "first life")[39], asynchronous=False)
    first.close()  # a crash with 40 committed: the next life has the gap 40..99

    answers: list[tuple[int, str]] = []

    def on_commit(err, partitions) -> None:
        assert err is None, err
        answers.extend((tp.offset, tp.metadata or "") for tp in partitions)

    second = consumer(cbroker, group, on_commit=on_commit)
    second.subscribe([topic])
    r = Reader(second)
    r.until("the gap's range", second.open_ranges)
    produce(cbroker, topic, 100, 1100)
    commits = 0
    delivered = 0
    while delivered < 1060:
        got = r.take(1, f"record {delivered + 1} of 1060")
        second.commit(message=got[0], asynchronous=True)
        commits += 1
        delivered += 1
    r.until("the answer to the last commit", lambda: answers and answers[-1] == (1100, ""))
    assert second.commits_coalesced > 0 and len(answers) < commits, (len(answers), commits, second.commits_coalesced)
    primary_offsets = [offset for offset, _ in answers]
    assert primary_offsets == sorted(primary_offsets), "an answer went back"
    assert (stored(cbroker, group, topic).offset, stored(cbroker, group, topic).metadata or "") == (1100, "")
    print(f"\n{commits} asynchronous commits, {len(answers)} sent, {second.commits_coalesced} coalesced")
    second.close()


def test_pause_holds_what_the_worker_had_fetched_and_resume_delivers_it(cbroker):
    """The worker reads in batches: records it had fetched when the partition was paused are not
    delivered while paused, and neither lost nor repeated after resume()."""
    topic, group = make_topic(cbroker), f"g-{uuid.uuid4().hex[:8]}"
    produce(cbroker, topic, 0, 2000)
    first = consumer(cbroker, group)
    first.subscribe([topic])
    first.commit(message=take(first, 1, "first life")[0], asynchronous=False)
    first.close()  # a crash with 1 committed: the gap is 1..1999

    c = consumer(cbroker, group)
    c.subscribe([topic])
    r = Reader(c)
    got = r.take(10, "the gap's first records")
    assert c.open_ranges() == {(topic, 0): [(1, 2000, 1)]} and c.last_source == "catchup"
    c.pause([TopicPartition(topic, 0)])
    for _ in range(20):
        r.poll()
    assert r.got == [], f"{len(r.got)} records delivered while paused"
    c.resume([TopicPartition(topic, 0)])
    got += r.take(1989, "the rest of the gap after resume")
    offsets = [m.offset() for m in got]
    assert sorted(offsets) == list(range(1, 2000)), "records lost or repeated around the pause"
    c.close()


def test_mode_off_is_a_plain_consumer(cbroker):
    topic, group = make_topic(cbroker), f"g-{uuid.uuid4().hex[:8]}"
    produce(cbroker, topic, 0, 30)
    c = consumer(cbroker, group, **{"enable.parallel.rebalance": False})
    c.subscribe([topic])
    got = take(c, 20, "mode off")
    assert [m.offset() for m in got] == list(range(20))
    c.commit(message=got[9], asynchronous=False)
    c.close()
    produce(cbroker, topic, 30, 40)
    c = consumer(cbroker, group, **{"enable.parallel.rebalance": "false"})
    c.subscribe([topic])
    got = take(c, 30, "mode off after a crash")
    assert [m.offset() for m in got] == list(range(10, 40))   # back at the commit, in order
    assert not c.child_consumer_is_alive()
    assert stored(cbroker, group, topic).metadata in (None, "")
    c.close()


def test_bad_mode_value_is_refused():
    with pytest.raises(ValueError, match="enable.parallel.rebalance"):
        CatchUpConsumer({"group.id": "g", "enable.parallel.rebalance": "maybe"})
