"""events.py: which transitions emit which Events (pure), and the annotations they follow."""

from __future__ import annotations

from datetime import datetime, timezone

from flotilla_operator import annotations as ann
from flotilla_operator import events as ev

NOW = datetime(2026, 11, 26, 2, 0, tzinfo=timezone.utc)


def status(gen=1, **conds):
    return {"observedGeneration": gen, "conditions": [
        {"type": t, "status": s, "reason": r, "message": f"{t} {r}"} for t, (s, r) in conds.items()]}


def reasons(events):
    return [(e.type, e.reason) for e in events]


def test_cluster_roll_scale_and_readiness_transitions():
    ready = status(Ready=("True", "BrokersReady"), Reconciling=("False", "Converged"))
    rolling = status(Ready=("False", "RollingUpdate"), Reconciling=("True", "RollingUpdate"))
    # Rolls are the roll gate's to announce (roll_started / roll_finished), not the status'.
    assert reasons(ev.cluster_events(ready, rolling)) == []
    assert reasons(ev.cluster_events(rolling, ready)) == [("Normal", "ClusterReady")]
    scaling = status(Ready=("False", "Scaling"), Reconciling=("True", "Scaling"))
    assert reasons(ev.cluster_events(ready, scaling)) == [("Normal", "Scaling")]
    assert reasons(ev.cluster_events(scaling, ready)) == [("Normal", "Scaled"), ("Normal", "ClusterReady")]
    blocked = status(Ready=("False", "ScaleDownBlocked"), Reconciling=("True", "ScaleDownBlocked"))
    assert reasons(ev.cluster_events(ready, blocked)) == [("Warning", "ScaleDownBlocked")]
    lost = status(Ready=("False", "BrokersNotReady"), Reconciling=("False", "Converged"))
    assert reasons(ev.cluster_events(ready, lost)) == [("Warning", "ClusterNotReady")]
    failed = status(Ready=("False", "ApplyFailed"), Reconciling=("False", "Converged"))
    assert reasons(ev.cluster_events(ready, failed)) == [("Warning", "ApplyFailed")]
    assert reasons(ev.cluster_events(failed, failed)) == []


def test_stalled_warns_once_with_its_own_reason():
    ok = status(Ready=("True", "BrokersReady"), Stalled=("False", "AsExpected"))
    bad = status(Ready=("False", "InvalidSpec"), Stalled=("True", "InvalidSpec"))
    assert reasons(ev.cluster_events(ok, bad)) == [("Warning", "InvalidSpec")]
    assert reasons(ev.cluster_events(bad, bad)) == []


def test_roll_gate_events():
    assert reasons(ev.roll_events("demo", 3, 2, 2, None, False)) == [("Normal", "BrokerRestarting")]
    assert reasons(ev.roll_events("demo", 2, 2, 2, None, False)) == []  # still the same broker
    assert reasons(ev.roll_events("demo", None, 0, None, None, False)) == []  # a new StatefulSet
    assert reasons(ev.roll_events("demo", 2, 2, None, "broker 1 waits: broker(s) 0 not Ready", False)) == [
        ("Normal", "RollWaiting")]
    assert reasons(ev.roll_events("demo", 2, 2, None, "broker 1 waits", True)) == []


def test_quota_events():
    pending = status(Ready=("False", "Pending"), Stalled=("False", "AsExpected"))
    applied = status(Ready=("True", "Applied"), Stalled=("False", "AsExpected"))
    assert reasons(ev.quota_events({}, pending)) == []
    assert reasons(ev.quota_events(pending, applied)) == [("Normal", "QuotaApplied")]
    assert reasons(ev.quota_events(applied, applied)) == []
    assert reasons(ev.quota_events(applied, status(gen=2, Ready=("True", "Applied")))) == [("Normal", "QuotaApplied")]
    down = status(Ready=("False", "Unreachable"), Stalled=("False", "AsExpected"))
    assert reasons(ev.quota_events(applied, down)) == [("Warning", "QuotaNotApplied")]
    assert reasons(ev.quota_events(down, down)) == []
    conflict = status(Ready=("False", "Conflict"), Stalled=("True", "Conflict"))
    assert reasons(ev.quota_events(pending, conflict)) == [("Warning", "Conflict")]


def test_user_events_warn_once_when_its_quotas_yield_to_a_client_quota():
    applied = status(Ready=("True", "Applied"), Stalled=("False", "AsExpected"))
    yielded = {**status(Ready=("True", "Applied"), Stalled=("False", "AsExpected")),
               "quotaConflict": "quotas not applied: ClientQuota q already sets the quota of user alice"}
    assert reasons(ev.user_events(applied, yielded)) == [("Warning", "QuotaConflict")]
    assert reasons(ev.user_events(yielded, yielded)) == []  # every resync: no new event
    assert reasons(ev.user_events(yielded, {**yielded, "observedGeneration": 2})) == [
        ("Normal", "UserApplied"), ("Warning", "QuotaConflict")]
    assert reasons(ev.user_events(yielded, applied)) == []  # the conflict is over: status says so


def test_deletion_events():
    done = status(Ready=("True", "Deleted"))
    assert reasons(ev.deletion_events({}, done, ran=True, deleted=5, topic="t")) == [("Normal", "RecordsDeleted")]
    assert reasons(ev.deletion_events(done, done, ran=True, deleted=0, topic="t")) == []
    assert reasons(ev.deletion_events({}, done, ran=True, deleted=0, topic="t")) == [("Normal", "NothingToDelete")]
    gone = status(Ready=("False", "GroupNotFound"), Stalled=("False", "AsExpected"))
    assert reasons(ev.deletion_events(done, gone, ran=True, deleted=0, topic="t")) == [("Warning", "DeletionFailed")]
    assert reasons(ev.deletion_events(gone, gone, ran=True, deleted=0, topic="t")) == []


def test_event_object_is_a_core_v1_event_about_the_resource():
    body = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": "demo", "namespace": "ns", "uid": "u1", "resourceVersion": "7"}}
    obj = ev.event_object(body, ev.Event("Normal", "RollStarted", "x" * 2000), component="flotilla-operator",
                          timestamp="2026-11-26T02:00:00Z")
    assert obj["involvedObject"] == {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "name": "demo",
                                     "namespace": "ns", "uid": "u1", "resourceVersion": "7"}
    assert obj["metadata"] == {"generateName": "demo.", "namespace": "ns"}
    assert obj["reason"] == "RollStarted" and len(obj["message"]) == 1024
    assert obj["source"] == {"component": "flotilla-operator"}


def test_annotations():
    meta = {"annotations": {ann.PAUSE_RECONCILIATION: "True", ann.MANUAL_ROLLING_UPDATE: "yes"}}
    assert ann.paused(meta) and not ann.rolling_update_requested(meta)
    assert not ann.paused({}) and not ann.paused(None)
    sts = {"spec": {"template": {"metadata": {"annotations": {ann.RESTART_TOKEN: "t1"}}}}}
    assert ann.restart_token({}, sts, NOW) == ("t1", False)
    assert ann.restart_token({"annotations": {ann.MANUAL_ROLLING_UPDATE: "true"}}, sts, NOW) == ("2026-11-26T02:00:00Z", True)
    assert ann.restart_token({}, None, NOW) == (None, False)


def test_a_scale_passing_through_applying_changes_neither_ends_nor_restarts():
    """Each step re-applies the StatefulSet, so Reconciling shows ApplyingChanges until the
    controller has seen it: the remembered progress bridges it."""
    scaling = status(Ready=("False", "Scaling"), Reconciling=("True", "Scaling"))
    applying = status(Ready=("False", "ApplyingChanges"), Reconciling=("True", "ApplyingChanges"))
    ready = status(Ready=("True", "BrokersReady"), Reconciling=("False", "Converged"))
    assert reasons(ev.cluster_events(scaling, applying, "Scaling")) == []
    assert reasons(ev.cluster_events(applying, scaling, "Scaling")) == []
    assert reasons(ev.cluster_events(applying, ready, "Scaling")) == [("Normal", "Scaled"), ("Normal", "ClusterReady")]
    # Paused mid-way: not the end of it.
    paused = status(Ready=("False", "Scaling"), Reconciling=("False", "ReconciliationPaused"),
                    ReconciliationPaused=("True", "ReconciliationPaused"))
    assert reasons(ev.cluster_events(scaling, paused, "Scaling")) == [("Normal", "ReconciliationPaused")]


def test_a_roll_starts_with_a_new_template_over_brokers_and_finishes_ready():
    assert reasons(ev.roll_started("h1", "h2", 3)) == [("Normal", "RollStarted")]
    assert reasons(ev.roll_started("h1", "h1", 3)) == []  # the same template: a partition or a scale step
    assert reasons(ev.roll_started(None, "h2", 0)) == []  # a new StatefulSet: nothing to restart
    rolling = status(Ready=("False", "RollingUpdate"), Reconciling=("True", "RollingUpdate"))
    ready = status(Ready=("True", "BrokersReady"), Reconciling=("False", "Converged"))
    assert reasons(ev.roll_finished(True, rolling)) == []
    assert reasons(ev.roll_finished(True, ready)) == [("Normal", "RollFinished")]
    assert reasons(ev.roll_finished(False, ready)) == []
