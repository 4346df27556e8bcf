"""A restarted broker leads under new leader epochs, as Apache Kafka 4.1's does (issue 18).

Kafka fences a broker that starts again until it is back (its partitions lose their leader,
epoch + 1, and get it back, epoch + 1), so nothing is written under an epoch its previous process
led with, and OffsetForLeaderEpoch still tells where that epoch ended. One broker, clean restart
and kill -9; both targets.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.e2e.test_offset_for_leader_epoch import offset_for_leader_epoch
from flotilla.testenv import kafka_wire


def epochs(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader epoch, from Metadata once every partition has a leader."""
    with kafka_wire.connect(bootstrap) as conn:
        conn.wait_for_leaders(topic, 2, timeout=60)
        parts = conn.metadata([topic]).topics[0].partitions
    return {int(p.partition_index): int(p.leader_epoch) for p in parts}


def produce(bootstrap: str, topic: str, n: int) -> None:
    with kafka_wire.connect(bootstrap) as conn:
        for p in (0, 1):
            assert conn.produce(topic, p, kafka_wire.build_batch(
                [(None, b"v%d" % i) for i in range(n)])).error_code == ErrorCode.none


def test_a_restarted_broker_leads_under_new_leader_epochs(broker):
    topic = kafka_wire.unique_topic("epoch-restart")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 2) == ErrorCode.none
    produce(broker.bootstrap, topic, 3)
    first = epochs(broker.bootstrap, topic)

    broker.restart()  # a clean stop
    second = epochs(broker.bootstrap, topic)
    assert all(second[p] > first[p] for p in first), (first, second)
    produce(broker.bootstrap, topic, 2)

    broker.kill9()
    broker.start()
    third = epochs(broker.bootstrap, topic)
    assert all(third[p] > second[p] for p in second), (second, third)
    with kafka_wire.connect(broker.bootstrap) as conn:
        for p in (0, 1):
            # Each earlier epoch ends where its process stopped writing.
            assert offset_for_leader_epoch(conn, 4, topic, p, first[p]) == (ErrorCode.none, first[p], 3)
            assert offset_for_leader_epoch(conn, 4, topic, p, second[p]) == (ErrorCode.none, second[p], 5)
