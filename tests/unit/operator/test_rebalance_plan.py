"""The rebalance planner (builders/rebalance_plan.py): valid, balanced, minimal, rack-aware plans."""

from __future__ import annotations

from collections import Counter

import pytest

from flotilla_operator.builders.rebalance_plan import Move, Unsatisfiable, moves, next_batch, target_assignment


def ring(topic: str, partitions: int, rf: int, brokers: int) -> dict:
    return {(topic, i): [(i + k) % brokers for k in range(rf)] for i in range(partitions)}


def test_scale_up_and_down_of_a_30_partition_topic_balances_replicas_and_leaders():
    current = ring("t", 30, 3, 3)
    up = target_assignment(current, range(5))
    assert Counter(b for r in up.values() for b in r) == {b: 18 for b in range(5)}
    assert Counter(r[0] for r in up.values()) == {b: 6 for b in range(5)}
    down = target_assignment(up, [0, 1, 2])
    assert Counter(r[0] for r in down.values()) == {b: 10 for b in range(3)}


def test_unsatisfiable_names_the_topics():
    with pytest.raises(Unsatisfiable, match=r"replication factor 3 of topic\(s\) orders, payments exceeds "
                                            r"the 2 broker\(s\) left") as err:
        target_assignment({("payments", 0): [1, 2, 3], ("orders", 0): [1, 2, 3], ("x", 0): [1]}, [1, 2])
    assert err.value.topics == ("orders", "payments")


def test_batches():
    data = Move(("t", 0), (0, 1), (0, 2))
    order = Move(("t", 1), (0, 1), (1, 0))
    assert next_batch([data, order], [], 1) == [data]
    assert next_batch([order], [("t", 0)], 1) == []
    assert next_batch([order], [], 1) == [order]
    assert moves({("t", 0): [0, 1]}, {("t", 0): (0, 2)}) == [data]
