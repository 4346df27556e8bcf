"""KafkaCluster status from the StatefulSet's status."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from flotilla_operator.builders.common import CONFIG_HASH_ANNOTATION
from flotilla_operator.status import kafka_cluster_status, same_status

NOW = datetime(2026, 11, 21, 12, 0, 0, tzinfo=timezone.utc)


def sts(*, gen=2, observed=2, replicas=3, ready=3, updated=3, current="r1", update="r1", hash_="h1"):
    return {
        "metadata": {"generation": gen},
        "spec": {"template": {"metadata": {"annotations": {CONFIG_HASH_ANNOTATION: hash_}}}},
        "status": {
            "observedGeneration": observed, "replicas": replicas, "readyReplicas": ready,
            "updatedReplicas": updated, "currentRevision": current, "updateRevision": update,
        },
    }


def conds(status):
    return {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}


def compute(owner, statefulset, **kw):
    return kafka_cluster_status(owner, replicas=kw.pop("replicas", 3), port=9092, config_hash=kw.pop("config_hash", "h1"),
                                statefulset=statefulset, now=kw.pop("now", NOW), **kw)


def test_ready(owner):
    s = compute(owner, sts())
    assert conds(s) == {"Ready": ("True", "BrokersReady"), "Reconciling": ("False", "Converged"), "Degraded": ("False", "AsExpected"),
                       "Stalled": ("False", "AsExpected")}
    assert s["observedGeneration"] == owner.generation
    assert all(c["observedGeneration"] == owner.generation for c in s["conditions"])
    assert s["bootstrapServers"] == "demo-bootstrap.kafka.svc:9092"
    assert s["readyReplicas"] == 3 and s["replicas"] == 3 and s["configHash"] == "h1"
    assert s["selector"] == "app.kubernetes.io/name=flotilla,app.kubernetes.io/instance=demo,app.kubernetes.io/component=broker"


def test_creating(owner):
    s = compute(owner, None)
    assert conds(s)["Ready"] == ("False", "Creating") and conds(s)["Reconciling"] == ("True", "Creating")
    assert s["readyReplicas"] == 0


def test_rolling_update(owner):
    s = compute(owner, sts(updated=1, ready=2, update="r2"))
    assert conds(s)["Ready"] == ("False", "RollingUpdate")
    assert conds(s)["Reconciling"] == ("True", "RollingUpdate")
    assert conds(s)["Degraded"] == ("False", "AsExpected")  # one broker down during a roll is expected
    assert "1/3" in s["conditions"][0]["message"]


def test_new_spec_not_yet_seen(owner):
    assert conds(compute(owner, sts(gen=3, observed=2)))["Ready"] == ("False", "ApplyingChanges")
    assert conds(compute(owner, sts(hash_="old"), config_hash="new"))["Reconciling"] == ("True", "ApplyingChanges")


def test_scaling(owner):
    s = compute(owner, sts(replicas=3, ready=3), replicas=5)
    assert conds(s)["Ready"] == ("False", "Scaling") and "3 brokers, want 5" in s["conditions"][0]["message"]


def test_degraded_when_broker_not_ready_at_rest(owner):
    s = compute(owner, sts(ready=2))
    assert conds(s)["Ready"] == ("False", "BrokersNotReady")
    assert conds(s)["Degraded"] == ("True", "BrokersNotReady")


def test_error(owner):
    s = compute(owner, sts(), error="applying Service x: forbidden", error_reason="ApplyFailed")
    assert conds(s)["Ready"] == ("False", "ApplyFailed") and conds(s)["Degraded"] == ("True", "ApplyFailed")
    assert "forbidden" in s["conditions"][2]["message"]


def test_last_transition_time_kept_while_status_unchanged(owner):
    first = compute(owner, sts(ready=2))
    later = compute(owner, sts(ready=2), now=NOW + timedelta(minutes=5), previous=first)
    assert later["conditions"][0]["lastTransitionTime"] == first["conditions"][0]["lastTransitionTime"]
    flipped = compute(owner, sts(), now=NOW + timedelta(minutes=6), previous=later)
    assert flipped["conditions"][0]["lastTransitionTime"] == "2026-11-21T12:06:00Z"


def test_same_status(owner):
    a = compute(owner, sts())
    assert same_status(a, dict(a))
    assert not same_status(None, a)
    assert not same_status(a, compute(owner, sts(ready=2)))
