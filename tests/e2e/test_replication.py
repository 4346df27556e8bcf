"""Replication (issue 11) on three broker processes with their metadata in the test API server:
followers copy their leaders' logs byte for byte, acks=all waits for the ISR, leaders fail over to
in-sync replicas without losing acknowledged writes, min.insync.replicas refuses writes the ISR
cannot hold, and a diverged follower truncates and converges.

Brokers are killed with SIGKILL: process crashes, not power loss. A killed broker's page cache
survives, so its own unsynced writes are there when it restarts; what these tests show is that
acknowledged writes survive on the other replicas and are never changed by a failover.

    pytest -m kube tests/e2e/test_replication.py
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster, ClusterBroker
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("replication on a Flotilla cluster on Kubernetes metadata"),
]

LAG_MS = 4000  # replica.lag.time.max.ms: followers that stop fetching leave the ISR within seconds
OVERRIDES = {"replica.lag.time.max.ms": str(LAG_MS), "replica.fetch.backoff.ms": "200"}


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3, overrides=OVERRIDES) as c:
        yield c


def create_topic(broker: ClusterBroker, partitions: int, rf: int = 3, configs: dict[str, str] | None = None,
                 prefix: str = "repl") -> str:
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(broker.bootstrap) as conn:
        code = conn.create_topic(topic, partitions, configs=configs, replication_factor=rf)
    assert int(code) == 0, f"CreateTopics {topic} RF={rf} through broker {broker.node_id}: {code!r}"
    return topic


def partition_states(cluster: BrokerCluster, topic: str, via: ClusterBroker | None = None) -> dict[int, tuple]:
    """partition -> (leader, leader epoch, replicas, isr) from Metadata."""
    md = cluster.metadata(via or cluster.running()[0], [topic])
    return {int(p.partition_index): (int(p.leader_id), int(p.leader_epoch), tuple(int(r) for r in p.replica_nodes),
                                     tuple(int(r) for r in p.isr_nodes)) for p in md.topics[0].partitions}


def segment_bytes(broker: ClusterBroker, topic: str, partition: int) -> bytes:
    """Every .log segment of a partition on one broker, concatenated in offset order."""
    d = Path(broker.log_dirs) / f"{topic}-{partition}"
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def wait_replicas_identical(cluster: BrokerCluster, topic: str, partitions: int, timeout: float = 60.0) -> None:
    def same() -> bool:
        for p in range(partitions):
            copies = {b.node_id: segment_bytes(b, topic, p) for b in cluster.brokers}
            if len(set(copies.values())) != 1:
                return False
        return True
    wait_for(f"every replica of {topic} to hold the same bytes", same, timeout=timeout, interval=0.5)


def assert_identical_after_clean_stop(cluster: BrokerCluster, topic: str, partitions: int, also=()) -> None:
    """Stop every broker cleanly; then every replica of every partition of `topic` (and of the
    topics `also` names, with as many partitions) holds the same bytes."""
    for broker in cluster.brokers:
        broker.stop(timeout=60)
    for t in (topic, *also):
        for p in range(partitions):
            copies = {b.node_id: segment_bytes(b, t, p) for b in cluster.brokers}
            assert len(set(copies.values())) == 1, (
                f"{t}-{p}: replicas differ after a clean stop: { {n: len(c) for n, c in copies.items()} }")


def producer(bootstrap: str, **extra):
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
            "message.timeout.ms": 120000, "request.timeout.ms": 15000, "retry.backoff.ms": 100,
            "topic.metadata.refresh.interval.ms": 1000, "linger.ms": 5}
    conf.update(extra)
    return Producer(conf)


def read_all(bootstrap: str, topic: str, partitions: int, expect: int, timeout: float = 90.0) -> dict[int, list]:
    """partition -> [(offset, value)] read from the start with assign() (no group), until `expect`
    records arrived and nothing more for a second."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 1000})
    out: dict[int, list] = {p: [] for p in range(partitions)}
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        n, quiet_since = 0, None
        while time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                if n >= expect:
                    quiet_since = quiet_since or time.monotonic()
                    if time.monotonic() - quiet_since > 1.0:
                        break
                continue
            if m.error():
                continue
            quiet_since = None
            out[m.partition()].append((m.offset(), m.value()))
            n += 1
    finally:
        c.close()
    return out


# ---------------------------------------------------------------------------------------------

@pytest.mark.timeout(240)
def test_followers_copy_the_leaders_log_byte_for_byte(cluster):
    topic = create_topic(cluster.brokers[0], 6)
    cluster.wait_leaders(topic, 6)
    states = partition_states(cluster, topic)
    assert all(len(s[2]) == 3 and set(s[3]) == {1, 2, 3} for s in states.values()), states
    p = producer(cluster.bootstrap)
    acked = []
    for i in range(600):
        p.produce(topic, partition=i % 6, value=f"v{i}".encode(),
                  on_delivery=lambda err, msg: acked.append(msg) if err is None else None)
    assert p.flush(60) == 0
    assert len(acked) == 600
    wait_replicas_identical(cluster, topic, 6)
    got = read_all(cluster.bootstrap, topic, 6, 600)
    assert sorted(v for recs in got.values() for _, v in recs) == sorted(f"v{i}".encode() for i in range(600))
    assert all(segment_bytes(b, topic, p) for b in cluster.brokers for p in range(6))
    # metrics: nothing under-replicated; every broker's fetchers fetched from the two others
    for b in cluster.brokers:
        assert metric(b, "flotilla_under_replicated_partitions") == 0.0
        assert sum(1 for line in scrape(b).splitlines()
                   if line.startswith("flotilla_replica_fetches_total{") and float(line.split()[-1]) > 0) == 2


def scrape(broker: ClusterBroker) -> str:
    import urllib.request

    with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
        return r.read().decode()


def metric(broker: ClusterBroker, name: str) -> float:
    for line in scrape(broker).splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{}"):
            return float(line.split()[-1])
    raise AssertionError(f"{name} not in {broker.metrics_url}")


def leader_of(cluster: BrokerCluster, topic: str, partition: int) -> int:
    return partition_states(cluster, topic)[partition][0]


def wait_isr(cluster: BrokerCluster, topic: str, partitions: int, want: set[int], timeout: float = 60.0) -> dict:
    """Until every partition has a leader and exactly `want` as its ISR (as Metadata says)."""
    last: list = [None]

    def ok() -> bool:
        try:
            states = partition_states(cluster, topic)
        except Exception as e:  # a broker just went down
            last[0] = e
            return False
        last[0] = states
        return len(states) == partitions and all(s[0] >= 0 and set(s[3]) == want for s in states.values())
    wait_for(f"ISR {sorted(want)} on every partition of {topic} (last: {last[0]})", ok, timeout=timeout, interval=0.25)
    return last[0]


def records_batch(values: list[bytes]) -> bytes:
    return kafka_wire.build_batch([kafka_wire.Msg(None, v) for v in values])


@pytest.mark.timeout(300)
def test_min_insync_replicas_refuses_acks_all_and_nothing_above_the_high_watermark_is_read(cluster):
    from kio.schema.errors import ErrorCode

    topic = create_topic(cluster.brokers[0], 1, configs={"min.insync.replicas": "2"})
    cluster.wait_leaders(topic, 1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    leader = cluster.broker(leader_of(cluster, topic, 0))
    with kafka_wire.connect(leader.bootstrap) as conn:
        r = conn.produce(topic, 0, records_batch([b"committed-0", b"committed-1"]), acks=-1)
        assert r.error_code == ErrorCode.none and int(r.base_offset) == 0
    # Two of three brokers down: the followers.
    for b in cluster.brokers:
        if b is not leader:
            b.kill9()
    with kafka_wire.connect(leader.bootstrap, timeout=40) as conn:
        # Until the ISR shrinks, an acks=1 write is in the leader's log but not committed: the
        # high watermark stays at 2 and consumers read nothing past it.
        r = conn.produce(topic, 0, records_batch([b"uncommitted"]), acks=1)
        assert r.error_code == ErrorCode.none and int(r.base_offset) == 2
        assert conn.list_offsets(topic, 0, -1) == 2
        fetched = fetch_values(conn, topic, 0, 0)
        assert fetched == [b"committed-0", b"committed-1"]
        # An acks=all write waits for the ISR; when the ISR shrinks to the leader alone (the
        # followers' Leases expire, or replica.lag.time.max.ms passes) it is in the log, but held
        # by fewer than min.insync.replicas: NOT_ENOUGH_REPLICAS_AFTER_APPEND.
        r = conn.produce(topic, 0, records_batch([b"after-append"]), acks=-1, timeout_ms=30000)
        assert r.error_code == ErrorCode.not_enough_replicas_after_append, r
    wait_isr(cluster, topic, 1, {leader.node_id})
    with kafka_wire.connect(leader.bootstrap) as conn:
        # With the ISR below min.insync.replicas, acks=all is refused before anything is appended.
        end = conn.list_offsets(topic, 0, -1)
        r = conn.produce(topic, 0, records_batch([b"refused"]), acks=-1)
        assert r.error_code == ErrorCode.not_enough_replicas, r
        assert conn.list_offsets(topic, 0, -1) == end
        assert b"refused" not in fetch_values(conn, topic, 0, 0)
        # acks=1 is not bound by min.insync.replicas
        r = conn.produce(topic, 0, records_batch([b"acks-1"]), acks=1)
        assert r.error_code == ErrorCode.none
    # the leader reports its partition under-replicated
    assert metric(leader, "flotilla_under_replicated_partitions") == 1.0


def fetch_values(conn, topic: str, partition: int, offset: int) -> list[bytes]:
    """Record values a consumer's Fetch (v11, read_uncommitted) returns from `offset`."""
    import datetime

    from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
    from kio.static.primitive import i32, i64

    req = FetchRequest(replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=100), min_bytes=i32(1),
                       max_bytes=i32(1 << 20), isolation_level=0, session_id=i32(0), session_epoch=i32(-1),
                       topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                           partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
                           log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
                       forgotten_topics_data=(), rack_id="")
    resp = conn.request(req)
    p = resp.responses[0].partitions[0]
    assert int(p.error_code) == 0, p
    return [v for _, v in offsets_and_values(p.records or b"")]


def offsets_and_values(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in the whole batches of `data` (Flotilla's own batch reader)."""
    from broker.protocol import records
    from broker.protocol.batch_records import decode_records

    out, pos = [], 0
    while True:
        size = records.peek_size(data, pos)
        if size is None or pos + size > len(data):
            return out
        batch = bytes(data[pos:pos + size])
        h = records.read_header(batch, 0)
        out += [(r.offset, _value(r.tail)) for r in decode_records(batch, h)]
        pos += size


def _value(tail: bytes) -> bytes | None:
    """A record's value from its bytes after the timestamp delta: offset delta, key, value."""
    from broker.protocol.batch_records import _varint

    _, pos = _varint(tail, 0)  # offset delta
    key_len, pos = _varint(tail, pos)
    pos += max(key_len, 0)
    value_len, pos = _varint(tail, pos)
    return None if value_len < 0 else bytes(tail[pos:pos + value_len])


@pytest.mark.timeout(300)
def test_a_diverged_former_leader_truncates_on_return_and_converges(cluster):
    """The leader takes acks=1 writes its followers never fetched (they were killed), then dies; the
    followers return and one of them leads (it was in the ISR) and takes acks=all writes at the
    same offsets. The old leader comes back as a follower: OffsetForLeaderEpoch tells it where its
    epoch ended on the new leader, it truncates there and copies the new leader's batches, so all
    three replicas end with the same segment bytes and the unreplicated writes are gone."""
    from kio.schema.errors import ErrorCode

    topic = create_topic(cluster.brokers[0], 1)
    cluster.wait_leaders(topic, 1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    old = cluster.broker(leader_of(cluster, topic, 0))
    others = [b for b in cluster.brokers if b is not old]
    with kafka_wire.connect(old.bootstrap) as conn:
        for i in range(5):
            r = conn.produce(topic, 0, records_batch([f"replicated-{i}-{j}".encode() for j in range(4)]), acks=-1)
            assert r.error_code == ErrorCode.none
    wait_replicas_identical(cluster, topic, 1)
    for b in others:
        b.kill9()
    with kafka_wire.connect(old.bootstrap) as conn:
        for i in range(3):
            r = conn.produce(topic, 0, records_batch([f"lost-{i}-{j}".encode() for j in range(3)]), acks=1)
            assert r.error_code == ErrorCode.none and int(r.base_offset) == 20 + 3 * i
    old.kill9()
    diverged = segment_bytes(old, topic, 0)
    for b in others:
        b.start()
    cluster.wait_formed(timeout=90, expect=[b.node_id for b in others])
    alive = {b.node_id for b in others}
    new_leader = wait_for("a returned follower to lead", lambda: (
        lambda leader: leader if leader in alive else None)(partition_states(cluster, topic, others[0])[0][0]),
        timeout=60)
    with kafka_wire.connect(cluster.broker(new_leader).bootstrap) as conn:
        for i in range(4):
            r = conn.produce(topic, 0, records_batch([f"new-{i}-{j}".encode() for j in range(2)]), acks=-1)
            assert r.error_code == ErrorCode.none, r
            assert int(r.base_offset) == 20 + 2 * i  # the same offsets the lost writes had
    old.start()
    cluster.wait_formed(timeout=90)
    wait_isr(cluster, topic, 1, {1, 2, 3}, timeout=90)
    wait_replicas_identical(cluster, topic, 1)
    converged = segment_bytes(old, topic, 0)
    assert converged == segment_bytes(cluster.broker(new_leader), topic, 0), "the former leader's segments differ"
    replicated = [f"replicated-{i}-{j}".encode() for i in range(5) for j in range(4)]
    lost = [f"lost-{i}-{j}".encode() for i in range(3) for j in range(3)]
    new = [f"new-{i}-{j}".encode() for i in range(4) for j in range(2)]
    # Its own files: what it held when killed (the unreplicated writes at 20..28), and after it
    # truncated to 20 and copied the new leader's writes to the same offsets.
    assert offsets_and_values(diverged) == list(enumerate(replicated + lost))
    assert offsets_and_values(converged) == list(enumerate(replicated + new))
    with kafka_wire.connect(cluster.broker(new_leader).bootstrap) as conn:
        values = fetch_values(conn, topic, 0, 0)
    assert values == replicated + new
    assert "truncating from 29 to 20" in old.log_text(), old.log_tail()


def read_snapshot(cluster: BrokerCluster, topic: str, partitions: int) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of everything consumers can read now, from each leader."""
    out: dict[tuple[int, int], bytes] = {}
    states = partition_states(cluster, topic)
    for p, (leader, *_rest) in states.items():
        if leader < 0:
            continue
        try:
            with kafka_wire.connect(cluster.broker(leader).bootstrap, timeout=5) as conn:
                offset = 0
                while True:
                    got = offsets_and_values_at(conn, topic, p, offset)
                    if not got:
                        break
                    for o, v in got:
                        out[(p, o)] = v
                    offset = got[-1][0] + 1
        except Exception:
            continue  # leadership moving: this partition is read next time
    return out


def offsets_and_values_at(conn, topic: str, partition: int, offset: int) -> list[tuple[int, bytes | None]]:
    import datetime

    from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
    from kio.static.primitive import i32, i64

    req = FetchRequest(replica_id=i32(-1), max_wait=datetime.timedelta(milliseconds=0), min_bytes=i32(0),
                       max_bytes=i32(1 << 20), isolation_level=0, session_id=i32(0), session_epoch=i32(-1),
                       topics=(FetchTopic(topic=topic, partitions=(FetchPartition(
                           partition=i32(partition), current_leader_epoch=i32(-1), fetch_offset=i64(offset),
                           log_start_offset=i64(-1), partition_max_bytes=i32(1 << 20)),)),),
                       forgotten_topics_data=(), rack_id="")
    p = conn.request(req).responses[0].partitions[0]
    if int(p.error_code) != 0:
        raise RuntimeError(f"fetch {topic}-{partition}@{offset}: {p.error_code!r}")
    return [(o, v) for o, v in offsets_and_values(p.records or b"") if o >= offset]


@pytest.mark.timeout(900)
def test_acks_all_idempotent_writes_survive_five_leader_kills(cluster):
    """Issue 11's first 'done when': a 6-partition RF=3 topic, an idempotent acks=all producer
    writing numbered records while a leader broker is killed with SIGKILL (and restarted) five
    times. Every record whose delivery succeeded is read back exactly once, in order per
    partition, at the offset its delivery report named; and no offset read between kills ever
    holds a different value later."""
    import threading

    partitions = 6
    topic = create_topic(cluster.brokers[0], partitions)
    cluster.wait_leaders(topic, partitions)
    wait_isr(cluster, topic, partitions, {1, 2, 3})
    acked: list[tuple[int, int, bytes]] = []  # (partition, offset, value)
    failed: list[str] = []
    stop = threading.Event()

    def produce() -> None:
        p = producer(",".join(b.bootstrap for b in cluster.brokers))

        def report(err, msg) -> None:
            if err is None:
                acked.append((msg.partition(), msg.offset(), msg.value()))
            else:
                failed.append(str(err))
        i = 0
        while not stop.is_set():  # about 200 records a second
            try:
                p.produce(topic, partition=i % partitions, value=f"{i:08d}".encode(), on_delivery=report)
            except BufferError:
                p.poll(0.1)
                continue
            i += 1
            p.poll(0.005)
        assert p.flush(120) == 0

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    try:
        snapshots = kill_leaders(cluster, topic, partitions, times=5)
    finally:
        time.sleep(2)
        stop.set()
        thread.join(180)
    assert not thread.is_alive()
    assert len(acked) > 500, f"only {len(acked)} records acknowledged; failures: {failed[:5]}"
    final = read_all(cluster.bootstrap, topic, partitions, len(acked), timeout=120)
    check_after_failovers(acked, final, snapshots)


def kill_leaders(cluster: BrokerCluster, topic: str, partitions: int, times: int) -> list[dict]:
    """Kill (SIGKILL) the leader of partition k % partitions and restart it, `times` times, each
    time after the full ISR is back; returns what consumers could read after each failover and
    after each return (per-offset values)."""
    snapshots = []
    for kill in range(times):
        time.sleep(2)
        victim = cluster.broker(leader_of(cluster, topic, kill % partitions))
        victim.kill9()
        survivors = [b.node_id for b in cluster.brokers if b is not victim]
        # Its partitions move to in-sync survivors (the controller, after its Lease expires).
        wait_for("the victim's partitions to move", lambda: all(
            s[0] in survivors for s in partition_states(cluster, topic, cluster.broker(survivors[0])).values()),
            timeout=60, interval=0.25)
        snapshots.append(read_snapshot(cluster, topic, partitions))
        victim.start()
        cluster.wait_formed(timeout=90)
        wait_isr(cluster, topic, partitions, {1, 2, 3}, timeout=90)
        snapshots.append(read_snapshot(cluster, topic, partitions))
    return snapshots


def check_after_failovers(acked: list[tuple[int, int, bytes]], final: dict[int, list], snapshots: list[dict]) -> None:
    at = {(p, o): v for p, recs in final.items() for o, v in recs}
    # every acknowledged record is where its delivery report said, exactly once
    for p, o, v in acked:
        assert at.get((p, o)) == v, f"acked {v!r} at {p}@{o}, read {at.get((p, o))!r}"
    values = [v for recs in final.values() for _, v in recs]
    assert len(values) == len(set(values)), "a record was read twice"
    # in order per partition: the producer wrote increasing numbers to each partition
    for p, recs in final.items():
        nums = [int(v) for _, v in recs]
        assert nums == sorted(nums), f"partition {p} out of order"
    # offsets never change their value after a failover
    for snap in snapshots:
        for key, v in snap.items():
            assert at.get(key) == v, f"{key} held {v!r} before a failover and {at.get(key)!r} at the end"
    # ... and those checks had something to check: every snapshot read records (a partition whose
    # leadership was moving while a snapshot was taken is read in a later one, or not at all).
    assert snapshots and all(snapshots), [len(s) for s in snapshots]


@pytest.mark.timeout(900)
def test_java_verifiable_producer_and_consumer_across_five_leader_kills(cluster, tmp_path):
    """The same with Kafka's own VerifiableProducer (idempotent, acks=all) and VerifiableConsumer
    (a consumer group, --verbose: every record it reads), as Kafka's system tests drive them."""
    import json
    import signal
    import subprocess
    import threading

    from flotilla.testenv.brokers import kafka_tools

    try:
        kafka_tools.ensure_libs()
    except kafka_tools.ToolsMissing as e:
        pytest.skip(str(e))
    partitions = 6
    topic = create_topic(cluster.brokers[0], partitions)
    cluster.wait_leaders(topic, partitions)
    wait_isr(cluster, topic, partitions, {1, 2, 3})
    bootstrap = ",".join(b.bootstrap for b in cluster.brokers)
    config = tmp_path / "producer.properties"
    # (VerifiableProducer sets retries=0 unless told: idempotence needs them.)
    config.write_text("enable.idempotence=true\nacks=all\nretries=2147483647\nmax.in.flight.requests.per.connection=5\n"
                      "delivery.timeout.ms=120000\nrequest.timeout.ms=15000\n"
                      "retry.backoff.ms=100\nmetadata.max.age.ms=1000\nlinger.ms=5\n")
    producer_proc = subprocess.Popen(kafka_tools.command(
        "VerifiableProducer", "--bootstrap-server", bootstrap, "--topic", topic, "--throughput", "200",
        "--acks", "-1", "--producer.config", str(config)), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    events: list[dict] = []

    def read(proc, out) -> None:
        for line in proc.stdout:
            if line.startswith("{"):
                out.append(json.loads(line))
    reader = threading.Thread(target=read, args=(producer_proc, events), daemon=True)
    reader.start()
    try:
        wait_for("the producer's first acks", lambda: any(e["name"] == "producer_send_success" for e in events),
                 timeout=60)
        snapshots = kill_leaders(cluster, topic, partitions, times=5)
        time.sleep(2)
    finally:
        producer_proc.send_signal(signal.SIGTERM)  # it closes (flushes) its producer, then says so
        producer_proc.wait(150)
        reader.join(10)
    assert any(e["name"] == "shutdown_complete" for e in events)
    acked = [(int(e["partition"]), int(e["offset"]), e["value"].encode()) for e in events
             if e["name"] == "producer_send_success"]
    assert len(acked) > 500, f"only {len(acked)} acks: {[e for e in events if e['name'] != 'producer_send_success'][:5]}"

    consumer_config = tmp_path / "consumer.properties"
    consumer_config.write_text("metadata.max.age.ms=1000\n")
    consumer_proc = subprocess.Popen(kafka_tools.command(
        "VerifiableConsumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", f"verify-{topic}",
        "--verbose", "--reset-policy", "earliest", "--consumer.config", str(consumer_config)),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    consumed: list[dict] = []
    reader = threading.Thread(target=read, args=(consumer_proc, consumed), daemon=True)
    reader.start()
    acked_values = {v for _, _, v in acked}
    try:
        wait_for("the consumer to read every acknowledged record", lambda: acked_values <= {
            e["value"].encode() for e in list(consumed) if e["name"] == "record_data"}, timeout=180, interval=1)
        time.sleep(3)  # and whatever else is in the log
    finally:
        consumer_proc.send_signal(signal.SIGTERM)
        consumer_proc.wait(60)
        reader.join(10)
    # A consumer may be handed a record again (after a rebalance, before its commit): that is
    # the client's at-least-once, not the log's content; each offset must hold one value.
    seen: dict[tuple[int, int], bytes] = {}
    for e in consumed:
        if e["name"] == "record_data":
            key, value = (int(e["partition"]), int(e["offset"])), e["value"].encode()
            assert seen.setdefault(key, value) == value, f"{key} read as {seen[key]!r} and {value!r}"
    final: dict[int, list] = {p: [] for p in range(partitions)}
    for (p, o), v in sorted(seen.items()):
        final[p].append((o, v))
    check_after_failovers(acked, final, snapshots)


@pytest.mark.timeout(240)
def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(cluster):
    """ElectLeaders (API 43) after a failover: the controller moves leadership back to the first
    replica once it is in sync again (epoch bumped); other brokers answer NOT_CONTROLLER."""
    from kio.schema.errors import ErrorCode

    from tests.e2e.test_elect_leaders import elect

    topic = create_topic(cluster.brokers[0], 1)
    cluster.wait_leaders(topic, 1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    leader, epoch, replicas, _ = partition_states(cluster, topic)[0]
    assert leader == replicas[0]
    preferred = cluster.broker(leader)
    preferred.kill9()
    others = [b for b in cluster.brokers if b is not preferred]
    wait_for("another leader", lambda: partition_states(cluster, topic, others[0])[0][0] in
             {b.node_id for b in others}, timeout=60)
    preferred.start()
    cluster.wait_formed(timeout=90)
    wait_isr(cluster, topic, 1, {1, 2, 3}, timeout=60)
    moved_epoch = partition_states(cluster, topic)[0][1]
    controller = cluster.controller_id()
    bystander = next(b for b in cluster.brokers if b.node_id != controller)
    with kafka_wire.connect(bystander.bootstrap) as conn:
        top, results = elect(conn, 0, {topic: [0]})
    assert top == ErrorCode.not_controller and results == {(topic, 0): ErrorCode.not_controller}
    with kafka_wire.connect(cluster.broker(controller).bootstrap) as conn:
        top, results = elect(conn, 0, {topic: [0]})
        assert (top, results) == (ErrorCode.none, {(topic, 0): ErrorCode.none})
        top, results = elect(conn, 0, {topic: [0]})
        assert results == {(topic, 0): ErrorCode.election_not_needed}
    wait_for("the preferred replica to lead", lambda: partition_states(cluster, topic)[0][:2] ==
             (preferred.node_id, moved_epoch + 1), timeout=30)
    with kafka_wire.connect(preferred.bootstrap) as conn:
        r = conn.produce_when_led(topic, 0, records_batch([b"back"]), acks=-1)  # the store names it leader a moment before it acts as one
        assert r.error_code == ErrorCode.none, r


@pytest.fixture
def cluster_rf3_offsets(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3,
                      overrides={**OVERRIDES, "offsets.topic.replication.factor": "3"}) as c:
        yield c


@pytest.mark.timeout(300)
def test_committed_offsets_survive_killing_the_coordinator_at_replication_factor_3(cluster_rf3_offsets):
    """`__consumer_offsets` at replication factor 3: a commit is answered once the ISR holds it, so
    when the coordinator's broker is killed the group's new coordinator (the partition's new
    leader) has it, and the group resumes where it committed."""
    from confluent_kafka import Consumer, TopicPartition

    from tests.e2e.test_cluster import coordinator_of

    cluster = cluster_rf3_offsets
    topic = create_topic(cluster.brokers[0], 3)
    cluster.wait_leaders(topic, 3)
    group = f"g-{topic}"
    p = producer(cluster.bootstrap)
    for i in range(60):
        p.produce(topic, partition=i % 3, value=f"first-{i}".encode())
    assert p.flush(30) == 0

    def consume(n: int) -> list[bytes]:
        c = Consumer({"bootstrap.servers": ",".join(b.bootstrap for b in cluster.running()), "group.id": group,
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "topic.metadata.refresh.interval.ms": 1000})
        got: list[bytes] = []
        try:
            c.subscribe([topic])
            deadline = time.monotonic() + 90
            while len(got) < n and time.monotonic() < deadline:
                m = c.poll(0.5)
                if m is not None and not m.error():
                    got.append(m.value())
            c.commit(asynchronous=False)
            committed = c.committed([TopicPartition(topic, i) for i in range(3)], timeout=30)
            assert sum(tp.offset for tp in committed) == 60 + (len(got) if n == 10 else 0), committed
        finally:
            c.close()
        return got

    assert sorted(consume(60)) == sorted(f"first-{i}".encode() for i in range(60))
    states = partition_states(cluster, "__consumer_offsets")
    assert all(len(s[2]) == 3 for s in states.values())
    coordinator = coordinator_of(cluster.brokers[0].bootstrap, group)
    cluster.broker(coordinator).kill9()
    survivors = [b for b in cluster.brokers if b.node_id != coordinator]
    wait_for("a new coordinator", lambda: (lambda c: c if c != coordinator else None)(
        coordinator_of(survivors[0].bootstrap, group)), timeout=60, interval=1)
    p = producer(",".join(b.bootstrap for b in survivors))
    for i in range(10):
        p.produce(topic, partition=i % 3, value=f"second-{i}".encode())
    assert p.flush(60) == 0
    # the group resumes at its commit: only the new records
    assert sorted(consume(10)) == sorted(f"second-{i}".encode() for i in range(10))
