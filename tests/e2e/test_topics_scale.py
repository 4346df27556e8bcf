"""Topics at scale on one broker with the file metadata store: thousands of topics survive a
crash (kill -9: the journal is replayed) and a clean stop (everything compacted into the
snapshot); and a CreatePartitions this broker cannot open is undone, as a creation is, seen
through a real client (confluent-kafka's AdminClient)."""

from __future__ import annotations

import datetime
import json

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.static.primitive import i16, i32

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess
from tests.support.verify import read_all


def create_many(conn, names: list[str]) -> None:
    for start in range(0, len(names), 500):
        chunk = names[start:start + 500]
        resp = conn.request(CreateTopicsRequest(
            topics=tuple(CreatableTopic(name=n, num_partitions=i32(1), replication_factor=i16(1), assignments=(),
                                        configs=()) for n in chunk),
            timeout=datetime.timedelta(seconds=60), validate_only=False))
        assert [int(t.error_code) for t in resp.topics] == [0] * len(chunk)


def listed_with_leaders(broker: ServerProcess, prefix: str) -> dict[str, object]:
    with kafka_wire.connect(broker.bootstrap, timeout=60) as conn:
        md = conn.metadata(None)
    return {t.name: t.topic_id for t in md.topics if t.name.startswith(prefix) and int(t.error_code) == 0
            and len(t.partitions) == 1 and int(t.partitions[0].leader_id) >= 0}


@pytest.mark.timeout(300)
@pytest.mark.flotilla_only("white-box: the file metadata store's snapshot and journal")
def test_thousands_of_topics_survive_a_crash_and_a_clean_restart(broker: ServerProcess) -> None:
    names = [f"many-{i:05d}" for i in range(3000)]
    with kafka_wire.connect(broker.bootstrap, timeout=120) as conn:
        create_many(conn, names)
        assert int(conn.produce(names[-1], 0, kafka_wire.build_batch([(b"k", b"last")])).error_code) == 0
    before = listed_with_leaders(broker, "many-")
    assert len(before) == 3000
    data = broker.data_dir
    assert (data / "flotilla-metadata.journal").stat().st_size > 0

    broker.kill9()  # a crash: whatever is in the journal and not yet in the snapshot is replayed
    broker.start()
    assert listed_with_leaders(broker, "many-") == before  # the same topics, with the same ids
    assert [r.value for r in read_all(broker.bootstrap, names[-1], (0,))] == ["last"]

    assert broker.stop() in broker.clean_exit_codes  # a clean stop compacts: all in the snapshot
    assert (data / "flotilla-metadata.journal").stat().st_size == 0
    assert len([t for t in json.loads((data / "flotilla-metadata.json").read_text())["topics"]
                if t["name"].startswith("many-")]) == 3000
    broker.start()
    assert listed_with_leaders(broker, "many-") == before


@pytest.mark.timeout(120)
@pytest.mark.flotilla_only("white-box: a file in the log dir where a new partition's directory must go")
def test_a_grow_this_broker_cannot_open_is_undone(broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("grow")
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)])[topic].result(30)
    p = Producer({"bootstrap.servers": broker.bootstrap})
    p.produce(topic, b"before", key=b"k", partition=1)
    assert p.flush(30) == 0
    # The broker cannot make partition 3's directory: a regular file is in its way (as a disk
    # that refuses the new files would make it fail).
    blocker = broker.data_dir / f"{topic}-3"
    blocker.write_bytes(b"not a directory")
    with pytest.raises(Exception) as failed:
        admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    assert "could not open 1 of its new partitions" in str(failed.value), failed.value
    assert "given back its 2 partitions" in str(failed.value), failed.value
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 2
    assert [r.value for r in read_all(broker.bootstrap, topic, (1,))] == ["before"]
    # Once the way is clear, the same grow succeeds and the new partitions take writes.
    blocker.unlink()
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(30)
    assert len(admin.list_topics(topic, timeout=10).topics[topic].partitions) == 4
    p = Producer({"bootstrap.servers": broker.bootstrap})  # one that has not cached 2 partitions
    p.produce(topic, b"after", key=b"k", partition=3)
    assert p.flush(30) == 0
    assert [r.value for r in read_all(broker.bootstrap, topic, (3,))] == ["after"]
