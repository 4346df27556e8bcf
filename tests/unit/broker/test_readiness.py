"""The /readyz rule (broker/server/readiness.py) on metadata images built by hand."""

from __future__ import annotations

import uuid

from broker.metadata.store import BrokerRegistration, MetadataImage, PartitionState, TopicRecord
from broker.server.readiness import replica_readiness


def image(brokers: list[int], topics: dict[str, list[PartitionState]]) -> MetadataImage:
    return MetadataImage(
        cluster_id="c",
        brokers={n: BrokerRegistration(n, f"inc-{n}", ()) for n in brokers},
        controller_id=brokers[0] if brokers else None,
        topics={name: TopicRecord(name, uuid.uuid4(), len(parts), 3, {}, tuple(parts))
                for name, parts in topics.items()},
    )


def p(leader: int, replicas: tuple[int, ...], isr: tuple[int, ...]) -> PartitionState:
    return PartitionState(leader, 0, replicas, isr)


def test_ready_when_in_every_isr_with_leaders():
    img = image([1, 2, 3], {"a": [p(1, (1, 2, 3), (1, 2, 3)), p(2, (2, 3, 1), (2, 3, 1))],
                            "b": [p(3, (3,), (3,))]})
    r = replica_readiness(img, 1)
    assert r.ready and r.text == "ok: in the ISR of all 2 partition(s) it holds\n"
    # Partitions the broker does not hold do not count.
    assert replica_readiness(img, 3).text == "ok: in the ISR of all 3 partition(s) it holds\n"


def test_not_registered_is_not_ready():
    img = image([2, 3], {"a": [p(2, (2, 3), (2, 3))]})
    r = replica_readiness(img, 1)
    assert not r.ready and "not registered" in r.text


def test_out_of_isr_and_leaderless_partitions_are_counted_and_named():
    parts = [p(2, (2, 1), (2,)), p(2, (2, 1), (2, 1)), p(-1, (1,), (1,)), p(3, (3, 1), (3,))]
    img = image([1, 2, 3], {"t": parts, "u": [p(3, (3, 2), (3,))]})
    r = replica_readiness(img, 1)
    assert not r.ready
    assert r.text == "3 of 4 partition(s) behind: not in the ISR of 2 (t-0, t-3); no leader for 1 (t-2)\n"
    # Broker 2 lags on u-0 only.
    assert replica_readiness(img, 2).text.startswith("1 of 3 partition(s) behind: not in the ISR of 1 (u-0)")


def test_many_behind_names_a_few():
    img = image([1, 2], {"t": [p(2, (2, 1), (2,)) for _ in range(10)]})
    r = replica_readiness(img, 1)
    assert r.text == "10 of 10 partition(s) behind: not in the ISR of 10 (t-0, t-1, t-2, ...)\n"


def test_unassigned_topics_are_ignored():
    img = image([1], {})
    img = MetadataImage(img.cluster_id, img.brokers, 1,
                        {"new": TopicRecord("new", uuid.uuid4(), 3, 1, {}, None)})
    assert replica_readiness(img, 1).ready


def test_a_replica_a_reassignment_is_adding_does_not_hold_readiness_back():
    moving = PartitionState(1, 0, (2, 3, 1), (1, 2), adding=(3,), removing=(1,))
    img = image([1, 2, 3], {"a": [moving]})
    assert replica_readiness(img, 3).ready
    assert replica_readiness(img, 1).ready and replica_readiness(img, 2).ready
