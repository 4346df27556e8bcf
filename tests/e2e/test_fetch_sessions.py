"""KIP-227 fetch sessions over the wire (kio): the session state machine walked request by request,
long-polls inside a session, and the cache's eviction rules on a small cache.

The state-machine tests expect what Apache Kafka does and run against it too
(`--kafka-target=apache`). The eviction tests are Flotilla-only: Kafka 4 splits
max.incremental.fetch.session.cache.slots over 8 shards and puts each new session in the next
shard round-robin, so a cache of one slot cannot be set up there, and its minimum eviction time
is a constant 120 s.
"""

from __future__ import annotations

import threading
import time

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from flotilla.testenv.fetch_client import FINAL_EPOCH, INITIAL_EPOCH, SessionFetcher, exchange, fetch_request
from flotilla.testenv.kafka_wire import build_batch, unique_topic
from tests.support.prometheus import metric

VERSIONS = [12, 17]  # topic names, topic ids


def new_topic(conn: kafka_wire.KafkaConnection, version: int, partitions: int = 3):
    """Create a topic; returns how fetch requests of `version` name it (name or topic id)."""
    name = unique_topic("fs")
    assert conn.create_topic(name, partitions) == ErrorCode.none
    t = name if version < 13 else conn.metadata([name]).topics[0].topic_id
    # Until every partition answers a (sessionless) fetch without error: Apache Kafka's leaders
    # take a moment after CreateTopics, and an error would end a long poll at once.
    deadline = time.monotonic() + 15
    while True:
        ex = exchange(conn, fetch_request(version, 0, FINAL_EPOCH, {t: {p: 0 for p in range(partitions)}}))
        if all(p.error_code == ErrorCode.none for p in ex.partitions.values()) and len(ex.partitions) == partitions:
            return name, t
        assert time.monotonic() < deadline, ex.response
        time.sleep(0.1)


def produce(conn: kafka_wire.KafkaConnection, topic: str, partition: int, n: int = 1) -> None:
    """One batch of `n` records; retried while the partition's leader is still settling (Apache
    Kafka answers NOT_LEADER_OR_FOLLOWER for a moment after CreateTopics)."""
    deadline = time.monotonic() + 15
    while True:
        resp = conn.produce(topic, partition, build_batch([(None, b"v%d" % i) for i in range(n)]))
        if resp.error_code == ErrorCode.none:
            return
        assert resp.error_code.retriable and time.monotonic() < deadline, resp
        time.sleep(0.1)


@pytest.fixture
def conn(shared_broker):
    with kafka_wire.connect(shared_broker.bootstrap) as c:
        yield c


@pytest.mark.parametrize("version", VERSIONS)
def test_full_then_incremental_sends_only_changes(conn, version):
    name, t = new_topic(conn, version)
    produce(conn, name, 0, 2)
    full = exchange(conn, fetch_request(version, 0, INITIAL_EPOCH, {t: {0: 0, 1: 0, 2: 0}}))
    r = full.response
    assert r.error_code == ErrorCode.none and r.session_id != 0
    sid = r.session_id
    assert set(full.partitions) == {(t, 0), (t, 1), (t, 2)}
    assert full.partitions[(t, 0)].high_watermark == 2 and full.partitions[(t, 0)].records

    # The fetcher moves partition 0 to offset 2; nothing else changed: an empty response.
    inc = exchange(conn, fetch_request(version, sid, 1, {t: {0: 2}}))
    assert inc.response.error_code == ErrorCode.none and inc.response.session_id == sid
    assert inc.partitions == {}
    assert inc.request_bytes < full.request_bytes and inc.response_bytes < full.response_bytes

    # New data on partition 1 only: the response carries partition 1 only.
    produce(conn, name, 1)
    inc = exchange(conn, fetch_request(version, sid, 2, {}))
    assert set(inc.partitions) == {(t, 1)}
    p1 = inc.partitions[(t, 1)]
    assert p1.high_watermark == 1 and p1.records

    # Partition 1's offset not advanced by the fetcher: its records are sent again, and only them.
    inc = exchange(conn, fetch_request(version, sid, 3, {}))
    assert set(inc.partitions) == {(t, 1)}
    inc = exchange(conn, fetch_request(version, sid, 4, {t: {1: 1}}))
    assert inc.partitions == {}


@pytest.mark.parametrize("version", VERSIONS)
def test_incremental_add_and_forget(conn, version):
    name, t = new_topic(conn, version)
    name2, t2 = new_topic(conn, version, partitions=1)
    sid = exchange(conn, fetch_request(version, 0, INITIAL_EPOCH, {t: {0: 0, 1: 0}})).response.session_id
    assert sid != 0
    # Add another topic's partition and forget partition 1 in one incremental request.
    inc = exchange(conn, fetch_request(version, sid, 1, {t2: {0: 0}}, forgotten={t: [1]}))
    assert inc.response.error_code == ErrorCode.none
    assert set(inc.partitions) == {(t2, 0)}  # new to the session: its offsets are news
    produce(conn, name, 1)
    produce(conn, name2, 0)
    inc = exchange(conn, fetch_request(version, sid, 2, {}))
    assert set(inc.partitions) == {(t2, 0)}  # partition 1 is forgotten, whatever arrives there
    # Forgetting every partition ends the session: answered sessionless.
    inc = exchange(conn, fetch_request(version, sid, 3, {}, forgotten={t: [0], t2: [0]}))
    assert inc.response.error_code == ErrorCode.none and inc.response.session_id == 0
    gone = exchange(conn, fetch_request(version, sid, 4, {}))
    assert gone.response.error_code == ErrorCode.fetch_session_id_not_found


@pytest.mark.parametrize("version", VERSIONS)
def test_epoch_errors_and_unknown_session(conn, version):
    _, t = new_topic(conn, version, partitions=1)
    sid = exchange(conn, fetch_request(version, 0, INITIAL_EPOCH, {t: {0: 0}})).response.session_id
    assert sid != 0
    for wrong in (2, 7):
        r = exchange(conn, fetch_request(version, sid, wrong, {})).response
        assert r.error_code == ErrorCode.invalid_fetch_session_epoch
        assert r.session_id == 0 and r.responses == ()
    assert exchange(conn, fetch_request(version, sid, 1, {})).response.error_code == ErrorCode.none
    # A replay of epoch 1 is now wrong too; epoch 2 is right.
    assert exchange(conn, fetch_request(version, sid, 1, {})).response.error_code == ErrorCode.invalid_fetch_session_epoch
    assert exchange(conn, fetch_request(version, sid, 2, {})).response.error_code == ErrorCode.none
    unknown = sid % (2**31 - 2) + 1
    r = exchange(conn, fetch_request(version, unknown, 1, {})).response
    assert r.error_code == ErrorCode.fetch_session_id_not_found and r.session_id == 0


@pytest.mark.parametrize("version", VERSIONS)
def test_final_epoch_and_full_request_close_the_session(conn, version):
    _, t = new_topic(conn, version, partitions=1)
    # id 0, epoch -1: sessionless, as librdkafka fetches.
    r = exchange(conn, fetch_request(version, 0, FINAL_EPOCH, {t: {0: 0}})).response
    assert r.error_code == ErrorCode.none and r.session_id == 0 and len(r.responses) == 1
    sid = exchange(conn, fetch_request(version, 0, INITIAL_EPOCH, {t: {0: 0}})).response.session_id
    # id N, epoch 0: closes N and opens a new session.
    r = exchange(conn, fetch_request(version, sid, INITIAL_EPOCH, {t: {0: 0}})).response
    new_sid = r.session_id
    assert r.error_code == ErrorCode.none and new_sid not in (0, sid)
    assert exchange(conn, fetch_request(version, sid, 1, {})).response.error_code == ErrorCode.fetch_session_id_not_found
    # id N, epoch -1 (FINAL): closes N, full sessionless answer.
    r = exchange(conn, fetch_request(version, new_sid, FINAL_EPOCH, {t: {0: 0}})).response
    assert r.error_code == ErrorCode.none and r.session_id == 0 and len(r.responses) == 1
    assert exchange(conn, fetch_request(version, new_sid, 1, {})).response.error_code == ErrorCode.fetch_session_id_not_found


def test_long_poll_inside_a_session(conn, shared_broker):
    name, t = new_topic(conn, 12, partitions=2)
    sid = exchange(conn, fetch_request(12, 0, INITIAL_EPOCH, {t: {0: 0, 1: 0}})).response.session_id
    assert sid != 0
    # Idle: waits max_wait, answers nothing.
    t0 = time.monotonic()
    r = exchange(conn, fetch_request(12, sid, 1, {}, max_wait_ms=600))
    assert time.monotonic() - t0 >= 0.5 and r.partitions == {}

    def later() -> None:
        time.sleep(0.5)
        with kafka_wire.connect(shared_broker.bootstrap) as other:
            produce(other, name, 1)

    threading.Thread(target=later, daemon=True).start()
    t0 = time.monotonic()
    r = exchange(conn, fetch_request(12, sid, 2, {}, max_wait_ms=8000))
    elapsed = time.monotonic() - t0
    assert set(r.partitions) == {(t, 1)} and r.partitions[(t, 1)].records
    assert 0.3 < elapsed < 6, elapsed  # woken by the append, not by max_wait


def test_session_fetcher_consumes_through_a_session(conn):
    name, t = new_topic(conn, 17, partitions=4)
    for p in range(4):
        produce(conn, name, p, 3)
    f = SessionFetcher(conn, version=17)
    f.add(t, 4)
    ex = f.fetch()
    assert f.session_id != 0 and len(ex.partitions) == 4 and f.records == 12
    idle = f.fetch()  # the offsets moved: the request carries them, the response nothing
    assert idle.partitions == {}
    idle = f.fetch()  # nothing changed at all: an empty request and an empty response
    assert idle.partitions == {} and idle.request_bytes < ex.request_bytes and idle.response_bytes < 100
    produce(conn, name, 2, 5)
    ex = f.fetch()
    assert set(ex.partitions) == {(t, 2)} and f.records == 17
    assert f.kinds == {"full": 1, "incremental": 3}


# -- eviction on a small cache ---------------------------------------------------------------------


def session_of(bootstrap: str, version: int, t, partitions: int, replica_id: int = -1) -> int:
    with kafka_wire.connect(bootstrap) as c:
        return exchange(c, fetch_request(version, 0, INITIAL_EPOCH, {t: {p: 0 for p in range(partitions)}},
                                         replica_id=replica_id)).response.session_id


def alive(bootstrap: str, version: int, sid: int, epoch: int) -> bool:
    with kafka_wire.connect(bootstrap) as c:
        code = exchange(c, fetch_request(version, sid, epoch, {})).response.error_code
    assert code in (ErrorCode.none, ErrorCode.fetch_session_id_not_found), code
    return code == ErrorCode.none


@pytest.mark.flotilla_only("Kafka 4 shards the cache 8 ways, round-robin: no one-slot cache there")
@pytest.mark.broker_config({"max.incremental.fetch.session.cache.slots": "1"})
def test_rule1_follower_session_displaces_consumer_session(broker):
    with kafka_wire.connect(broker.bootstrap) as c:
        _, t = new_topic(c, 17, partitions=2)
    consumer = session_of(broker.bootstrap, 17, t, 2)
    assert consumer != 0
    assert session_of(broker.bootstrap, 17, t, 2) == 0  # full cache, nothing evictable: sessionless
    assert alive(broker.bootstrap, 17, consumer, 1)
    follower = session_of(broker.bootstrap, 17, t, 1, replica_id=1)  # privileged, fewer partitions
    assert follower not in (0, consumer)
    assert not alive(broker.bootstrap, 17, consumer, 2)
    assert session_of(broker.bootstrap, 17, t, 2) == 0  # a consumer never displaces a young follower
    assert metric(broker.metrics_url, "flotilla_incremental_fetch_session_evictions_total") == 1
    assert metric(broker.metrics_url, "flotilla_incremental_fetch_sessions") == 1
    assert metric(broker.metrics_url, "flotilla_incremental_fetch_partitions_cached") == 1


@pytest.mark.flotilla_only("Kafka's minimum eviction time is a constant 120 s; its cache is sharded")
@pytest.mark.broker_config({"max.incremental.fetch.session.cache.slots": "1", "flotilla.fetch.session.eviction.ms": "500"})
def test_rule2_idle_session_is_evicted_by_any_newcomer(broker):
    with kafka_wire.connect(broker.bootstrap) as c:
        _, t = new_topic(c, 12, partitions=3)
    follower = session_of(broker.bootstrap, 12, t, 3, replica_id=1)
    assert follower != 0
    assert session_of(broker.bootstrap, 12, t, 1) == 0  # young and in use
    time.sleep(0.7)
    consumer = session_of(broker.bootstrap, 12, t, 1)  # smaller and unprivileged, but the follower idled
    assert consumer not in (0, follower)
    assert not alive(broker.bootstrap, 12, follower, 1)
    assert metric(broker.metrics_url, "flotilla_incremental_fetch_session_evictions_total") == 1


@pytest.mark.flotilla_only("Kafka's minimum eviction time is a constant 120 s; its cache is sharded")
@pytest.mark.broker_config({"max.incremental.fetch.session.cache.slots": "1", "flotilla.fetch.session.eviction.ms": "500"})
def test_rule3_bigger_session_displaces_old_busy_one(broker):
    with kafka_wire.connect(broker.bootstrap) as c:
        _, t = new_topic(c, 12, partitions=3)
        old = exchange(c, fetch_request(12, 0, INITIAL_EPOCH, {t: {0: 0, 1: 0}})).response.session_id
        assert old != 0
        epoch = 1
        deadline = time.monotonic() + 0.8
        while time.monotonic() < deadline:  # keep it in use: never stale (rule 2 does not apply)
            assert exchange(c, fetch_request(12, old, epoch, {})).response.error_code == ErrorCode.none
            epoch += 1
            time.sleep(0.05)
        assert session_of(broker.bootstrap, 12, t, 2) == 0  # old enough, but not bigger
        assert metric(broker.metrics_url, "flotilla_incremental_fetch_session_evictions_total") == 0
        bigger = session_of(broker.bootstrap, 12, t, 3)
        assert bigger not in (0, old)
        r = exchange(c, fetch_request(12, old, epoch, {})).response
        assert r.error_code == ErrorCode.fetch_session_id_not_found
    assert metric(broker.metrics_url, "flotilla_incremental_fetch_session_evictions_total") == 1
    assert metric(broker.metrics_url, "flotilla_incremental_fetch_partitions_cached") == 3


@pytest.mark.flotilla_only("Flotilla's metrics; Kafka's are in JMX")
def test_metrics_count_request_kinds(shared_broker, conn):
    url = shared_broker.metrics_url
    _, t = new_topic(conn, 12, partitions=2)
    before = {k: metric(url, "flotilla_fetch_requests_total", kind=k) for k in ("full", "incremental", "sessionless", "session_error")}
    f = SessionFetcher(conn, version=12)
    f.add(t, 2)
    for _ in range(3):
        f.fetch()
    exchange(conn, fetch_request(12, 0, FINAL_EPOCH, {t: {0: 0}}))
    exchange(conn, fetch_request(12, f.session_id, 99, {}))
    after = {k: metric(url, "flotilla_fetch_requests_total", kind=k) for k in before}
    assert {k: after[k] - before[k] for k in before} == {"full": 1, "incremental": 2, "sessionless": 1, "session_error": 1}
    assert metric(url, "flotilla_fetch_session_cache_slots") == 1000
    assert metric(url, "flotilla_fetch_session_cache_slots_used") >= 1


def test_restart_forgets_sessions(broker):
    with kafka_wire.connect(broker.bootstrap) as c:
        _, t = new_topic(c, 12, partitions=1)
        sid = exchange(c, fetch_request(12, 0, INITIAL_EPOCH, {t: {0: 0}})).response.session_id
        assert sid != 0
        assert exchange(c, fetch_request(12, sid, 1, {})).response.error_code == ErrorCode.none
    broker.restart()
    with kafka_wire.connect(broker.bootstrap) as c:
        r = exchange(c, fetch_request(12, sid, 2, {})).response
        assert r.error_code == ErrorCode.fetch_session_id_not_found
        # starting over with a full request works at once
        r = exchange(c, fetch_request(12, 0, INITIAL_EPOCH, {t: {0: 0}})).response
        assert r.error_code == ErrorCode.none and r.session_id != 0
