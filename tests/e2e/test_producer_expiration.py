"""producer.id.expiration.ms is applied (issue 8, item 5): idle idempotent producers are forgotten
every producer.id.expiration.check.interval.ms, so producer state and its snapshots stop growing
with every producer id ever seen, while a producer that keeps writing keeps its deduplication.
Raw kio over a real socket; the snapshot files are Flotilla's own layout."""

from __future__ import annotations

import json
import time

import pytest

from flotilla.testenv import kafka_wire

pytestmark = pytest.mark.flotilla_only("reads Flotilla's producer snapshot files")

IDLE_PRODUCERS = 150


def snapshot_producers(partition_dir) -> list[int]:
    newest = sorted(partition_dir.glob("*.snapshot"))[-1]
    return [p["id"] for p in json.loads(newest.read_bytes()[4:])["producers"]]


@pytest.mark.broker_config(producer__id__expiration__ms=3000,
                           producer__id__expiration__check__interval__ms=500)
def test_idle_producers_expire_and_a_live_one_keeps_deduplicating(broker):
    topic = kafka_wire.unique_topic("pid")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
        for _ in range(IDLE_PRODUCERS):
            pid, epoch = conn.init_producer_id()
            batch = kafka_wire.build_batch([(None, b"once")], producer_id=pid, producer_epoch=epoch, base_sequence=0)
            assert int(conn.produce(topic, 0, batch).error_code) == 0
        live, live_epoch = conn.init_producer_id()
        seq = 0
        last = None
        deadline = time.monotonic() + 5.0  # past the expiration of the idle ones
        while time.monotonic() < deadline:
            last = kafka_wire.build_batch([(None, b"live %d" % seq)], producer_id=live, producer_epoch=live_epoch,
                                          base_sequence=seq)
            resp = conn.produce(topic, 0, last)
            assert int(resp.error_code) == 0
            last_offset = int(resp.base_offset)
            seq += 1
            time.sleep(0.25)
        # the live producer's retry of its last batch is still recognised as a duplicate
        resp = conn.produce(topic, 0, last)
        assert (int(resp.error_code), int(resp.base_offset)) == (0, last_offset)
        end = conn.list_offsets(topic, 0, -1)
    assert end == IDLE_PRODUCERS + seq

    broker.stop()  # clean shutdown: producer state is snapshotted at the log end
    assert snapshot_producers(broker.log_dirs / f"{topic}-0") == [live]
    assert "expired" in broker.log_text() and "idle producer ids" in broker.log_text()

    # The live producer's last write is now seconds old: a restart slower than producer.id.expiration.ms
    # (a loaded CI machine) would rightly expire it on load, as Kafka does, and accept the retry as new.
    # The restart checks that deduplication survives the snapshot, so it runs with a long expiration.
    broker.overrides["producer.id.expiration.ms"] = "600000"
    broker.start()
    with kafka_wire.connect(broker.bootstrap) as conn:
        resp = conn.produce(topic, 0, last)  # still a duplicate after the restart
        assert (int(resp.error_code), int(resp.base_offset)) == (0, last_offset)
        assert conn.list_offsets(topic, 0, -1) == end
