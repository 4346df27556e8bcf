"""KIP-392, consumers reading from a replica in their own rack, on three brokers in racks r1, r2, r3
with `replica.selector.class` = Kafka's RackAwareReplicaSelector (issue 40, item 2):

- over the wire (Fetch v12 with rack_id): the leader (broker 1, rack r1) answers a consumer in r2
  with preferred_read_replica = 2, no records and the offsets; one in r1 or in a rack no broker is
  in is served by the leader itself; the follower serves a Fetch v11+ up to its high watermark,
  answers OFFSET_OUT_OF_RANGE past its log end and NOT_LEADER_OR_FOLLOWER to a Fetch v10 (only
  v11+ may read from a follower); a KIP-227 session with the follower as target reads everything;
  a client's fetch quota throttles it at the follower;
- real clients with client.rack = r2, the Java consumer and librdkafka, read every record, and on
  Flotilla the follower in r2 served the bytes (its flotilla_follower_fetch_bytes_out_total);
- the Java consumer reading from the follower in r2 goes back to the leader when that follower is
  killed (kill -9), and reads every record written after.

The same tests run against three KRaft Kafka nodes configured alike (`make interop-apache`); there
only what the clients and the wire show is checked (Kafka's metrics are JMX).

    pytest -m kube tests/e2e/test_fetch_from_follower.py
    pytest tests/e2e/test_fetch_from_follower.py --kafka-target=apache
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from flotilla.testenv.fetch_client import SessionFetcher, exchange, fetch_request
from flotilla.testenv.waiting import wait_for
from tests.e2e.test_quotas import alter_quotas
from tests.e2e.test_replication import offsets_and_values, records_batch, wait_isr
from tests.support import java_client
from tests.support.fleet import fleet_cluster

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]

RACK_AWARE = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
OVERRIDES = {"replica.selector.class": RACK_AWARE, "replica.fetch.backoff.ms": "200",
             "offsets.topic.replication.factor": "1"}
RACKS = {1: "r1", 2: "r2", 3: "r3"}
RECORDS = 200  # in batches of 10


@pytest.fixture
def cluster(kafka_target, tmp_path, request):
    with fleet_cluster(kafka_target, tmp_path, request, overrides=OVERRIDES,
                       node_overrides={n: {"broker.rack": rack} for n, rack in RACKS.items()}) as c:
        yield c


def led_by_1(cluster, prefix: str) -> str:
    """A topic of one partition on brokers 1, 2, 3 (leader 1, rack r1), RECORDS records written
    acks=all, every replica in sync and the follower 2's high watermark at the end."""
    topic = kafka_wire.unique_topic(prefix)
    with kafka_wire.connect(cluster.broker(1).bootstrap) as conn:
        code = conn.create_topic(topic, assignment=[[1, 2, 3]])
        assert int(code) == 0, code
    wait_for(f"{topic} led by broker 1", lambda: cluster.leaders(topic), timeout=60,
             until=lambda leaders: leaders.get(0) == 1)
    with kafka_wire.connect(cluster.broker(1).bootstrap) as conn:
        for b in range(RECORDS // 10):
            batch = records_batch([f"v{b * 10 + i}".encode() for i in range(10)])
            conn.produce_when_led(topic, 0, batch, acks=-1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    with kafka_wire.connect(cluster.broker(2).bootstrap) as conn:
        wait_for(f"follower 2's high watermark of {topic} at {RECORDS}", lambda: fetch(conn, topic, 0).high_watermark,
                 timeout=30, until=lambda hw: int(hw) == RECORDS)
    return topic


def fetch(conn, topic: str, offset: int, rack: str = "", version: int = 12, max_wait_ms: int = 0):
    """One consumer Fetch (sessionless) of partition 0 from `offset`; the partition's answer."""
    request = fetch_request(version, 0, -1, {topic: {0: offset}}, max_wait_ms=max_wait_ms, rack_id=rack)
    [t] = exchange(conn, request).response.responses
    [p] = t.partitions
    return p


def values(records) -> list[bytes]:
    return [v for _, v in offsets_and_values(records or b"")]


def test_the_leader_names_the_follower_in_the_consumers_rack_and_the_follower_serves_it(cluster):
    topic = led_by_1(cluster, "kip392-wire")
    with kafka_wire.connect(cluster.broker(1).bootstrap) as leader:
        p = fetch(leader, topic, 0, rack="r2")
        assert (int(p.error_code), int(p.preferred_read_replica)) == (0, 2), p
        assert not p.records and int(p.high_watermark) == RECORDS and int(p.log_start_offset) == 0, p
        assert int(p.last_stable_offset) == RECORDS, p
        assert int(fetch(leader, topic, 0, rack="r3").preferred_read_replica) == 3
        for rack in ("r1", "elsewhere", ""):  # the leader's own rack, no broker's rack, no rack: the leader
            p = fetch(leader, topic, 0, rack=rack)
            assert int(p.preferred_read_replica) == -1 and values(p.records)[:1] == [b"v0"], (rack, p)
        p = fetch(leader, topic, 0, version=10)  # before v11 there is no rack: the leader serves
        assert int(p.error_code) == 0 and values(p.records)[:1] == [b"v0"], p
    with kafka_wire.connect(cluster.broker(2).bootstrap) as follower:
        got, offset = [], 0
        while offset < RECORDS:
            p = fetch(follower, topic, offset, rack="r2")
            assert int(p.error_code) == 0 and int(p.preferred_read_replica) == -1, p
            batch = offsets_and_values(p.records or b"")
            assert batch, f"the follower returned nothing at {offset} below its high watermark: {p}"
            got += [v for _, v in batch]
            offset = batch[-1][0] + 1
        assert got == [f"v{i}".encode() for i in range(RECORDS)]
        p = fetch(follower, topic, RECORDS, rack="r2")  # at the end: nothing, no error
        assert int(p.error_code) == 0 and not p.records, p
        p = fetch(follower, topic, RECORDS + 5, rack="r2")
        assert int(p.error_code) == ErrorCode.offset_out_of_range, p
        p = fetch(follower, topic, 0, version=10)  # a v10 consumer reads from leaders only
        assert int(p.error_code) == ErrorCode.not_leader_or_follower, p

    # a KIP-227 session with the follower as target reads everything, then waits for new records
    with kafka_wire.connect(cluster.broker(2).bootstrap) as conn:
        fetcher = SessionFetcher(conn, version=12, rack_id="r2", max_wait_ms=100)
        fetcher.add(topic, 1)
        deadline = time.monotonic() + 30
        while fetcher.records < RECORDS:
            ex = fetcher.fetch()
            assert int(ex.response.error_code) == 0, ex.response
            assert time.monotonic() < deadline, f"{fetcher.records} of {RECORDS} read from the follower"
        assert fetcher.session_id != 0, "the follower opened no fetch session"
        # a parked incremental fetch at the end is answered when the follower's high watermark moves
        fetcher.max_wait_ms = 10_000
        with kafka_wire.connect(cluster.broker(1).bootstrap) as leader:
            leader.produce_when_led(topic, 0, records_batch([b"late"]), acks=-1)
        started = time.monotonic()
        ex = fetcher.fetch()
        while fetcher.records < RECORDS + 1 and time.monotonic() - started < 15:
            ex = fetcher.fetch()
        assert fetcher.records == RECORDS + 1, ex.response
        assert fetcher.kinds.get("incremental", 0) >= 1 and int(ex.response.session_id) == fetcher.session_id, \
            (fetcher.kinds, ex.response)
        assert time.monotonic() - started < 8, "the follower answered only at max_wait"

    # a client's fetch quota (KIP-13) holds at the follower as at the leader: 100 B/s for this client id
    [(code, message)] = alter_quotas(cluster.broker(1).bootstrap,
                                     [({"client-id": "kip392-quota"}, {"consumer_byte_rate": 100})])
    assert code == 0, message

    def throttle_ms() -> int:
        with kafka_wire.KafkaConnection(cluster.broker(2).bootstrap, client_id="kip392-quota") as conn:
            request = fetch_request(12, 0, -1, {topic: {0: 0}}, rack_id="r2")
            return int(exchange(conn, request).response.throttle_time.total_seconds() * 1000)
    wait_for("a throttled fetch at the follower for client kip392-quota", throttle_ms, timeout=60,
             until=lambda ms: ms > 0)


def scrape(broker) -> str:
    import urllib.request

    with urllib.request.urlopen(broker.metrics_url, timeout=10) as r:
        return r.read().decode()


def sample(text: str, name: str, labels: str) -> float:
    """The value of `name{labels}` in a Prometheus text page (0 when absent)."""
    m = re.search(rf"^{re.escape(name)}\{{{re.escape(labels)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


FOLLOWER_BYTES = "flotilla_follower_fetch_bytes_out_total"


def served_from_followers(cluster, kafka_target) -> dict[int, float] | None:
    """Per broker, the record bytes it served to consumers in r2 from partitions it follows
    (Flotilla only: Kafka's own counters are JMX)."""
    if kafka_target != "flotilla":
        return None
    return {b.node_id: sample(scrape(b), FOLLOWER_BYTES, 'client_rack="r2"') for b in cluster.running()}


def log_size(cluster, topic: str) -> float:
    return sample(scrape(cluster.broker(1)), "flotilla_log_size_bytes", f'partition="0",topic="{topic}"')


def rack_r2_config(cluster) -> str:
    """A Java client properties file putting the client in rack r2."""
    path = cluster.workdir / "client-r2.properties"
    path.write_text("client.rack=r2\n")
    return str(path)


def check_served_by_follower_2(cluster, kafka_target, topic: str, before) -> None:
    after = served_from_followers(cluster, kafka_target)
    if after is None:
        return
    delta = {n: after[n] - before[n] for n in after}
    assert delta[1] == 0 and delta[3] == 0, delta  # the leader and the other rack's follower: nothing
    assert delta[2] >= log_size(cluster, topic) > 0, (delta, log_size(cluster, topic))


def test_java_and_librdkafka_consumers_in_rack_r2_read_everything_from_the_follower_in_r2(cluster, kafka_target):
    java_client.require()
    topic = led_by_1(cluster, "kip392-java")
    before = served_from_followers(cluster, kafka_target)
    proc = subprocess.run(java_client.command("consume", "--bootstrap", cluster.bootstrap, "--topic", topic,
                                              "--offset-reset", "earliest", "--max", str(RECORDS),
                                              "--timeout-ms", "60000", "--config", str(rack_r2_config(cluster))),
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    got = [json.loads(line)["value"] for line in proc.stdout.splitlines()
           if line.startswith("{") and json.loads(line).get("event") == "record"]
    assert got == [f"v{i}" for i in range(RECORDS)], (proc.returncode, proc.stderr[-2000:])
    check_served_by_follower_2(cluster, kafka_target, topic, before)

    from confluent_kafka import Consumer, TopicPartition

    topic = led_by_1(cluster, "kip392-rdkafka")
    before = served_from_followers(cluster, kafka_target)
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "kip392", "enable.auto.commit": False,
                  "client.rack": "r2", "fetch.wait.max.ms": 100})
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + 60
        while len(got) < RECORDS and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    assert got == [f"v{i}".encode() for i in range(RECORDS)], len(got)
    check_served_by_follower_2(cluster, kafka_target, topic, before)



def test_java_consumer_goes_back_to_the_leader_when_its_follower_dies(cluster, kafka_target):
    """Kafka's Java consumer drops its preferred replica when a fetch from it fails; the leader stops
    naming the follower once it is out of the ISR (Flotilla: its Lease expired; Kafka: fenced), so
    the consumer reads the rest from the leader."""
    java_client.require()
    topic = led_by_1(cluster, "kip392-failover")
    proc = subprocess.Popen(java_client.command("consume", "--bootstrap", cluster.broker(1).bootstrap, "--topic", topic,
                                                "--offset-reset", "earliest", "--max", str(2 * RECORDS),
                                                "--timeout-ms", "150000", "--config", str(rack_r2_config(cluster))),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got, reader = java_client.collect_records(proc)
    try:
        wait_for(f"the Java consumer in r2 to read the first {RECORDS} records", lambda: len(got), timeout=60,
                 until=lambda n: n >= RECORDS)
        served = served_from_followers(cluster, kafka_target)
        assert served is None or served[2] >= log_size(cluster, topic) > 0, served  # read from the follower so far
        cluster.broker(2).kill9()
        with kafka_wire.connect(cluster.broker(1).bootstrap) as conn:
            for b in range(RECORDS // 10, 2 * RECORDS // 10):
                conn.produce_when_led(topic, 0, records_batch([f"v{b * 10 + i}".encode() for i in range(10)]), acks=1)
        wait_for(f"the Java consumer to read all {2 * RECORDS} records from the leader", lambda: len(got),
                 timeout=120, until=lambda n: n >= 2 * RECORDS)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
        reader.join(10)
    assert got == [f"v{i}" for i in range(2 * RECORDS)], (len(got), proc.stderr.read()[-2000:] if proc.stderr else "")
