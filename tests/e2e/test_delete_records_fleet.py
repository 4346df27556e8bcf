"""DeleteRecords (KIP-107) on three brokers, replication factor 3 (issue 20):

- through each client family (confluent-kafka, kafka-python, Kafka's DeleteRecordsCommand), the
  answer's low watermark is every replica's log start offset afterwards, read from each broker's
  `log-start-offset-checkpoint`;
- a follower that was down during the deletion (its log ending below the new start) catches up to
  the new log start: it starts afresh there (Kafka's handleOutOfRangeError) and keeps no segment
  below it;
- a live follower that does not fetch (SIGSTOP, still registered: long Leases) holds the low
  watermark: the request waits and answers REQUEST_TIMED_OUT with the low watermark as it was, as
  Kafka's DelayedDeleteRecords; once it fetches again the same request completes.

    pytest -m kube tests/e2e/test_delete_records_fleet.py
    pytest tests/e2e/test_delete_records_fleet.py --kafka-target=apache   # three KRaft Kafka nodes
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from tests.e2e.test_delete_records import wire_delete
from tests.e2e.test_replication import create_topic, partition_states, records_batch, wait_isr
from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.fleet import Fleet
from tests.support.fleet import fleet_cluster
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.timeout(300)]

# Long Leases: a SIGSTOPped follower stays registered (live) for the whole test, so it holds the
# low watermark (Kafka counts live replicas, in the ISR or not); short retention checks so that
# segments below the log start go quickly.
OVERRIDES = {"flotilla.metadata.lease.duration.ms": "60000", "replica.lag.time.max.ms": "60000",
             "replica.fetch.backoff.ms": "200", "log.retention.check.interval.ms": "300",
             "offsets.topic.replication.factor": "1"}
# Kafka's names for the same: a broker stays registered (unfenced) for broker.session.timeout.ms
# without heartbeats; the log start offsets are checkpointed every
# log.flush.start.offset.checkpoint.interval.ms (Flotilla writes the checkpoint as the start moves).
APACHE_OVERRIDES = {"broker.session.timeout.ms": "60000", "log.flush.start.offset.checkpoint.interval.ms": "200"}


@pytest.fixture
def cluster(kafka_target, tmp_path, request):
    with fleet_cluster(kafka_target, tmp_path, request, overrides=OVERRIDES, apache_overrides=APACHE_OVERRIDES) as c:
        yield c


def checkpointed_log_start(broker, topic: str, partition: int) -> int | None:
    """The log start a broker would recover: its `log-start-offset-checkpoint` entry, or, with
    none, its first segment's base offset (Kafka 4.1 checkpoints a log start only when it is above
    the first segment's base, as on a follower that started afresh at the new log start)."""
    from broker.log.checkpoints import LOG_START_OFFSET, read_checkpoint

    entry = read_checkpoint(Path(broker.log_dirs) / LOG_START_OFFSET).get((topic, partition))
    if entry is not None:
        return entry
    bases = [int(p.stem) for p in (Path(broker.log_dirs) / f"{topic}-{partition}").glob("*.log")]
    return min(bases) if bases else None


def wait_checkpoints(cluster: Fleet, topic: str, want: dict[int, int]) -> None:
    """Until every broker's log-start-offset-checkpoint holds `want` (partition -> offset)."""
    def seen() -> dict:
        return {b.node_id: {p: checkpointed_log_start(b, topic, p) for p in want} for b in cluster.running()}
    wait_for(f"every replica's checkpointed log start of {topic} at {want}", seen, timeout=60,
             until=lambda s: all(v == want for v in s.values()))


def write(broker, topic: str, partition: int, count: int, acks: int = -1) -> None:
    """`count` records in batches of 10; NOT_LEADER_OR_FOLLOWER is tried again (CI: a Kafka broker
    named leader by another's Metadata had not applied its leadership yet)."""
    with kafka_wire.connect(broker.bootstrap) as conn:
        for start in range(0, count, 10):
            batch = records_batch([b"r-%06d" % i for i in range(start, min(count, start + 10))])
            r = conn.produce_when_led(topic, partition, batch, acks=acks)
            assert int(r.error_code) == 0, r


def test_every_client_family_and_every_replicas_log_start(cluster, tmp_path):
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaAdminClient, TopicPartition as KTP

    topic = create_topic(cluster.brokers[0], 2, prefix="dr-fleet")
    cluster.wait_leaders(topic, 2)
    wait_isr(cluster, topic, 2, {1, 2, 3})
    leaders = {p: cluster.broker(s[0]) for p, s in partition_states(cluster, topic).items()}
    for p in (0, 1):
        write(leaders[p], topic, p, 200)
    bootstrap = cluster.bootstrap

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([CTP(topic, 0, 120), CTP(topic, 1, 80)], request_timeout=60, operation_timeout=30)
    got = {tp.partition: f.result(60).low_watermark for tp, f in futures.items()}
    assert got == {0: 120, 1: 80}  # answered once every live replica had moved its log start
    wait_checkpoints(cluster, topic, got)

    kp = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
    try:
        result = kp.delete_records({KTP(topic, 0): -1}, timeout_ms=30000)  # -1: the high watermark
    finally:
        kp.close()
    assert (result[KTP(topic, 0)]["error_code"], result[KTP(topic, 0)]["low_watermark"]) == (0, 200)

    kafka_tools.libs_or_skip()
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 1, "offset": 150}]}))
    out = subprocess.run(kafka_tools.command("DeleteRecordsCommand", "--bootstrap-server", bootstrap,
                                             "--offset-json-file", str(offsets)),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    assert f"partition: {topic}-1\tlow_watermark: 150" in out.stdout, out.stdout
    wait_checkpoints(cluster, topic, {0: 200, 1: 150})


# Small segments, so that the leader has segments wholly below the new log start. Kafka 4.1 refuses
# a segment.bytes below 1 MiB (KIP-1030) and has the internal `internal.segment.bytes` for tests;
# Flotilla still accepts a small segment.bytes (a difference: see docs/testing.md).
SMALL_SEGMENTS = {"flotilla": {"segment.bytes": "2000"}, "apache": {"internal.segment.bytes": "2000"}}


def test_a_follower_down_during_the_deletion_catches_up_to_the_new_log_start(cluster, kafka_target):
    topic = create_topic(cluster.brokers[0], 1, prefix="dr-down", configs=SMALL_SEGMENTS[kafka_target])
    cluster.wait_leaders(topic, 1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    leader_id, _, replicas, _ = partition_states(cluster, topic)[0]
    leader = cluster.broker(leader_id)
    down = cluster.broker(next(r for r in replicas if r != leader_id))
    write(leader, topic, 0, 100)
    down.stop()  # graceful: its Lease goes, so it is no longer a live replica
    wait_isr(cluster, topic, 1, set(replicas) - {down.node_id})
    # offsets 100-299, acks=all: the stopped follower, out of the ISR and unregistered, holds up
    # nothing (though it was caught up less than replica.lag.time.max.ms ago); it ends at 100
    write(leader, topic, 0, 200)

    assert wire_delete(leader.bootstrap, 2, {(topic, 0): 250}) == {(topic, 0): (ErrorCode.none, 250)}
    down.start()
    wait_isr(cluster, topic, 1, {1, 2, 3})
    wait_checkpoints(cluster, topic, {0: 250})

    def first_segment() -> int:
        return min(int(p.stem) for p in (Path(down.log_dirs) / f"{topic}-0").glob("*.log"))
    # its log ended below the new start: it starts afresh there, keeping nothing below it
    wait_for(f"broker {down.node_id}'s first segment of {topic}-0 at 250", first_segment, timeout=60,
             until=lambda base: base == 250)
    with kafka_wire.connect(leader.bootstrap) as conn:
        assert conn.list_offsets(topic, 0, -2) == 250


def test_a_live_follower_that_does_not_fetch_holds_the_request_until_it_fetches(cluster):
    topic = create_topic(cluster.brokers[0], 1, prefix="dr-frozen")
    cluster.wait_leaders(topic, 1)
    wait_isr(cluster, topic, 1, {1, 2, 3})
    leader_id, _, replicas, _ = partition_states(cluster, topic)[0]
    leader = cluster.broker(leader_id)
    frozen = cluster.broker(next(r for r in replicas if r != leader_id))
    write(leader, topic, 0, 50)  # acks=all: both followers fetched, and told the leader their log start (0)

    os.kill(frozen.pid, signal.SIGSTOP)
    try:
        with kafka_wire.connect(leader.bootstrap, timeout=30) as conn:
            from tests.e2e.test_delete_records import delete_request
            resp = conn.request(delete_request(2, {(topic, 0): 30}, timeout_ms=2000))
        [p] = resp.topics[0].partitions
        # Kafka's DelayedDeleteRecords at its timeout: the low watermark as the deletion left it
        assert (ErrorCode(p.error_code), int(p.low_watermark)) == (ErrorCode.request_timed_out, 0)
        with kafka_wire.connect(leader.bootstrap) as conn:
            assert conn.list_offsets(topic, 0, -2) == 30  # the leader's log start moved all the same

        answer: dict = {}

        def delete() -> None:
            answer["got"] = wire_delete(leader.bootstrap, 2, {(topic, 0): 30}, timeout_ms=60000)

        waiting = threading.Thread(target=delete, daemon=True)
        waiting.start()
        waiting.join(3)
        assert waiting.is_alive() and not answer  # still waiting for the frozen follower
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    waiting.join(60)
    assert answer.get("got") == {(topic, 0): (ErrorCode.none, 30)}
    wait_checkpoints(cluster, topic, {0: 30})
