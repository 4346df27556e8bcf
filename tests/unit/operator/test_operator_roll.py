"""The roll gate (issue 18, item 9b): with Parallel pod management the StatefulSet would roll the
next broker whatever the others' state, so the operator opens `partition` one broker at a time,
only while every broker pod is Ready and every partition has a leader and a full ISR."""

from __future__ import annotations

from flotilla_operator.builders.roll import (
    TEMPLATE_HASH_ANNOTATION,
    RollDecision,
    isr_shortfalls,
    roll_partition,
    roll_state,
)

HASH = "t1"


def sts(replicas=3, *, hash_=HASH, generation=4, observed=4, update="new", current="old", partition=3):
    return {"metadata": {"name": "demo-broker", "generation": generation,
                         "annotations": {TEMPLATE_HASH_ANNOTATION: hash_}},
            "spec": {"replicas": replicas, "updateStrategy": {"rollingUpdate": {"partition": partition}}},
            "status": {"observedGeneration": observed, "updateRevision": update, "currentRevision": current}}


def pod(ordinal, revision="old", ready=True, terminating=False):
    meta = {"name": f"demo-broker-{ordinal}", "labels": {"controller-revision-hash": revision}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def topic(name, *parts):
    return {"metadata": {"name": f"demo-{name}"}, "spec": {"topicName": name},
            "status": {"assignment": [{"leader": l, "replicas": r, "isr": i} for l, r, i in parts]}}


FULL = topic("orders", (0, [0, 1, 2], [0, 1, 2]), (1, [1, 2, 0], [1, 2, 0]))


def decide(statefulset, pods, topics=(), replicas=3):
    state = roll_state(statefulset, pods, desired_template_hash=HASH, desired_replicas=replicas)
    return roll_partition(state, pods, list(topics))


def test_a_new_fleet_is_not_held():
    assert decide(None, []) == RollDecision(0)


def test_nothing_rolls_before_the_controller_has_seen_a_new_template():
    pods = [pod(i) for i in range(3)]
    assert decide(sts(hash_="t0", partition=0), pods, [FULL]) == RollDecision(3)  # template being changed now
    assert decide(sts(observed=3, update="old"), pods, [FULL]) == RollDecision(3)  # not observed yet
    # The controller has not seen the partition we opened (same template): it stays open.
    assert decide(sts(observed=3, partition=2), pods, [FULL]) == RollDecision(2)
    # Re-created over running pods (podManagementPolicy migration): held until revisions are known.
    assert decide(None, pods) == RollDecision(3)
    assert decide(None, pods, replicas=5) == RollDecision(5)


def test_the_highest_outdated_broker_rolls_first_when_the_fleet_is_whole():
    pods = [pod(0), pod(1), pod(2)]
    assert decide(sts(), pods, [FULL]) == RollDecision(2, restarting=2)
    pods = [pod(0), pod(1), pod(2, "new")]
    assert decide(sts(), pods, [FULL]) == RollDecision(1, restarting=1)
    assert decide(sts(), [pod(i, "new") for i in range(3)], [FULL]) == RollDecision(0)


def test_the_roll_waits_for_a_restarted_broker_to_be_ready():
    pods = [pod(0), pod(1), pod(2, "new", ready=False)]
    d = decide(sts(), pods, [FULL])
    assert d.partition == 2 and d.blocked and "broker 1 waits: broker(s) 2 not Ready" == d.waiting


def test_the_roll_waits_for_a_lower_broker_too():
    # What the StatefulSet alone would not check with Parallel: broker 0 is behind, so rolling
    # broker 1 would leave its partitions with one in-sync replica.
    pods = [pod(0, ready=False), pod(1), pod(2, "new")]
    d = decide(sts(), pods, [FULL])
    assert d.partition == 2 and "broker(s) 0 not Ready" in d.waiting


def test_the_roll_waits_for_every_isr_to_be_full():
    short = topic("orders", (0, [0, 1, 2], [0, 2]), (-1, [1, 2, 0], [1]))
    pods = [pod(0), pod(1), pod(2, "new")]
    d = decide(sts(), pods, [short])
    assert d.partition == 2 and d.waiting == "broker 1 waits: 2 partition(s) without a full ISR (orders-0, orders-1)"
    assert isr_shortfalls([FULL]) == []


def test_missing_and_stopping_pods_hold_the_roll():
    # Broker 1's pod is gone (re-created at the new revision, as partition 1 allows): broker 0 waits.
    d = decide(sts(), [pod(0), pod(2, "new")], [FULL])
    assert d.partition == 1 and d.waiting == "broker 0 waits: broker(s) 1 have no pod"
    d = decide(sts(), [pod(0), pod(1, terminating=True), pod(2, "new")], [FULL])
    # A stopping pod is being replaced: it is not the next to roll, and it holds the roll.
    assert d.partition == 1 and "broker(s) 1 are stopping" in d.waiting
