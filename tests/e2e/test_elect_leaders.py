"""ElectLeaders (API 43) on one broker, which is the controller: a preferred election where the
preferred replica already leads needs none, an unclean one for a partition with a live leader
neither, and unknown partitions are named. The fleet cases (moving leadership back to the
preferred replica after a failover) are in tests/e2e/test_replication.py."""

from __future__ import annotations

import datetime

from kio.schema.elect_leaders.v2.request import ElectLeadersRequest, TopicPartitions
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from flotilla.testenv import kafka_wire


def elect(conn, election_type: int, topics: dict[str, list[int]] | None):
    req = ElectLeadersRequest(
        election_type=i8(election_type), timeout=datetime.timedelta(seconds=10),
        topic_partitions=None if topics is None else tuple(
            TopicPartitions(topic=t, partitions=tuple(i32(p) for p in ps)) for t, ps in topics.items()))
    resp = conn.request(req)
    return resp.error_code, {(r.topic, int(p.partition_id)): p.error_code
                             for r in resp.replica_election_results for p in r.partition_result}


def test_elections_on_a_single_broker(broker):
    topic = kafka_wire.unique_topic("elect")
    with kafka_wire.connect(broker.bootstrap) as conn:
        assert conn.create_topic(topic, 2) == ErrorCode.none
        top, results = elect(conn, 0, {topic: [0, 1], "no-such-topic": [0]})
        assert top == ErrorCode.none
        assert results == {(topic, 0): ErrorCode.election_not_needed, (topic, 1): ErrorCode.election_not_needed,
                           ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition}
        top, results = elect(conn, 1, {topic: [0]})
        assert (top, results) == (ErrorCode.none, {(topic, 0): ErrorCode.election_not_needed})
        # every partition: those needing no election are left out
        top, results = elect(conn, 0, None)
        assert top == ErrorCode.none and not any(t == topic for t, _ in results)
