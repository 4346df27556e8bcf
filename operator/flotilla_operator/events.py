"""The Kubernetes Events the operator emits, decided from what changed. Pure: the reconcilers post
what these functions return (clients/kube.py Kube.post_event).

An Event marks an action or a transition, never a steady state: each function compares the status
before and after a run (or the StatefulSet's partition before and after), so a resync that
changes nothing emits nothing. Every reason is a constant here, listed in docs/operations.md, so
`kubectl get events --field-selector reason=RollStarted` finds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from broker.metadata.names import broker_pod_name

from .builders.pod_problems import REASONS as POD_PROBLEM_REASONS
from .status import PAUSED, READY, RECONCILING, STALLED

NORMAL, WARNING = "Normal", "Warning"

# KafkaCluster
ROLL_STARTED = "RollStarted"
BROKER_RESTARTING = "BrokerRestarting"
ROLL_WAITING = "RollWaiting"
ROLL_FINISHED = "RollFinished"
ROLLING_RESTART_REQUESTED = "RollingRestartRequested"
SCALING = "Scaling"
SCALED = "Scaled"
SCALE_DOWN_BLOCKED = "ScaleDownBlocked"
STATEFULSET_REPLACED = "StatefulSetReplaced"
CERTIFICATES_ISSUED = "CertificatesIssued"
CLUSTER_READY = "ClusterReady"
CLUSTER_NOT_READY = "ClusterNotReady"
APPLY_FAILED = "ApplyFailed"
REBALANCE_STARTED = "RebalanceStarted"
REBALANCE_COMPLETED = "RebalanceCompleted"
REBALANCE_BLOCKED = "RebalanceBlocked"
ORPHANS_REMOVED = "OrphansRemoved"
ORPHAN_REMOVAL_FAILED = "OrphanRemovalFailed"
# A pod-level cause (builders/pod_problems.py) appearing: a Warning whose reason is the cause's own
# (ImagePullFailed, Unschedulable, ClaimPending, CrashLoop).
# ClientQuota
QUOTA_APPLIED = "QuotaApplied"
QUOTA_NOT_APPLIED = "QuotaNotApplied"
QUOTA_CONFLICT = "QuotaConflict"
# KafkaUser
USER_APPLIED = "UserApplied"
USER_NOT_APPLIED = "UserNotApplied"
USER_REMOVED = "UserRemoved"
# RecordDeletion
RECORDS_DELETED = "RecordsDeleted"
NOTHING_TO_DELETE = "NothingToDelete"
DELETION_FAILED = "DeletionFailed"
# Every kind
RECONCILIATION_PAUSED = "ReconciliationPaused"
RECONCILIATION_RESUMED = "ReconciliationResumed"
# Stalled turning True emits a Warning with the Stalled condition's own reason
# (InvalidSpec, InvalidConfig, Conflict, ...).


@dataclass(frozen=True)
class Event:
    type: str  # Normal or Warning
    reason: str
    message: str


def _cond(status: Mapping[str, Any] | None, type_: str) -> dict[str, Any]:
    return next((c for c in (status or {}).get("conditions") or () if c.get("type") == type_), {})


def _true(status: Mapping[str, Any] | None, type_: str) -> bool:
    return _cond(status, type_).get("status") == "True"


def pause_events(previous: Mapping[str, Any] | None, status: Mapping[str, Any]) -> list[Event]:
    """ReconciliationPaused / ReconciliationResumed when the pause annotation comes or goes."""
    was, now = _true(previous, PAUSED), _true(status, PAUSED)
    if now and not was:
        return [Event(NORMAL, RECONCILIATION_PAUSED, _cond(status, PAUSED).get("message") or "")]
    if was and not now:
        return [Event(NORMAL, RECONCILIATION_RESUMED, "the pause annotation is gone: reconciling again")]
    return []


def stalled_events(previous: Mapping[str, Any] | None, status: Mapping[str, Any]) -> list[Event]:
    """A Warning when Stalled turns True (or its reason changes while True)."""
    new = _cond(status, STALLED)
    if new.get("status") != "True":
        return []
    old = _cond(previous, STALLED)
    if old.get("status") == "True" and old.get("reason") == new.get("reason") and old.get("message") == new.get("message"):
        return []
    return [Event(WARNING, new.get("reason") or "Stalled", new.get("message") or "")]


#: Reconciling's reason while the StatefulSet controller has not seen the latest apply (each step
#: of a roll or a scale passes through it): says nothing about whether a roll goes on.
TRANSIENT = "ApplyingChanges"
#: `cluster_events`' default: take the last progress from the previous status.
FROM_STATUS = object()


def progress_reason(status: Mapping[str, Any] | None) -> str | None:
    """Reconciling's reason while it is True (Creating, Scaling, RollingUpdate, ...), else None."""
    c = _cond(status, RECONCILING)
    return c.get("reason") if c.get("status") == "True" else None


def cluster_events(previous: Mapping[str, Any] | None, status: Mapping[str, Any],
                   last_progress: Any = FROM_STATUS) -> list[Event]:
    """A KafkaCluster's transitions: a roll or a scale starting and ending, a blocked scale-down,
    Ready won or lost, an apply failing, a spec that cannot be reconciled, a pause.
    `last_progress` is the last progress_reason other than TRANSIENT (the reconcilers remember it:
    a roll passes through TRANSIENT at every broker, which must neither end nor restart it)."""
    out = pause_events(previous, status) + stalled_events(previous, status)
    old_reason = progress_reason(previous) if last_progress is FROM_STATUS else last_progress
    new_reason = progress_reason(status)
    message = _cond(status, RECONCILING).get("message") or ""
    if new_reason != TRANSIENT and not _true(status, PAUSED) and new_reason != old_reason:
        # Rolls are announced by the roll gate itself (roll_started, roll_finished): with a
        # fast roll the status may never show RollingUpdate between two runs.
        if old_reason == "Scaling" and new_reason is None:
            out.append(Event(NORMAL, SCALED, f"{status.get('replicas')} brokers"))
        if new_reason == "Scaling":
            out.append(Event(NORMAL, SCALING, message))
        elif new_reason == SCALE_DOWN_BLOCKED:
            out.append(Event(WARNING, SCALE_DOWN_BLOCKED, message))
    old_ready, new_ready = _cond(previous, READY), _cond(status, READY)
    if new_ready.get("status") == "True" and old_ready.get("status") != "True":
        out.append(Event(NORMAL, CLUSTER_READY, new_ready.get("message") or ""))
    elif (old_ready.get("status") == "True" and new_ready.get("status") == "False"
          and (new_ready.get("reason") == "BrokersNotReady"
               or (new_ready.get("reason") in POD_PROBLEM_REASONS and new_reason is None))):
        # Not while a roll or a scale moves: those announce themselves. A pod-level cause
        # (builders/pod_problems.py) names itself in Ready's reason, and has its own Event too.
        out.append(Event(WARNING, CLUSTER_NOT_READY, new_ready.get("message") or ""))
    if new_ready.get("reason") == APPLY_FAILED and (old_ready.get("reason") != APPLY_FAILED
                                                    or old_ready.get("message") != new_ready.get("message")):
        out.append(Event(WARNING, APPLY_FAILED, new_ready.get("message") or ""))
    return out


def rebalance_events(previous: Mapping[str, Any] | None, rebalance: Mapping[str, Any] | None) -> list[Event]:
    """From status.rebalance before and after a rebalance step: RebalanceStarted when replicas
    start to move, RebalanceCompleted when a rebalance that moved them is done, RebalanceBlocked
    (a Warning) when it turns Blocked or its reason for being blocked changes."""
    old, new = previous or {}, rebalance or {}
    was, now = old.get("phase"), new.get("phase")
    brokers = ", ".join(str(b) for b in new.get("brokers") or ())
    if now == "Moving" and (was not in ("Moving", "Paused") or old.get("startedAt") != new.get("startedAt")):
        return [Event(NORMAL, REBALANCE_STARTED, f"{new.get('reason')}: moving {new.get('partitionsTotal')} "
                      f"partition(s) to spread them over broker(s) {brokers}")]
    if now == "Idle" and was in ("Moving", "Paused"):
        return [Event(NORMAL, REBALANCE_COMPLETED, f"{new.get('partitionsMoved')} partition(s) moved; "
                      f"{new.get('message') or ''}")]
    if now == "Blocked" and (was != "Blocked" or old.get("message") != new.get("message")):
        return [Event(WARNING, REBALANCE_BLOCKED, new.get("message") or "")]
    return []


def roll_started(live_template_hash: str | None, desired_template_hash: str, brokers: int) -> list[Event]:
    """RollStarted when the operator applies a new pod template over running brokers (a new
    configuration, image or resources, or a manual rolling update)."""
    if live_template_hash is None or live_template_hash == desired_template_hash or brokers <= 0:
        return []
    return [Event(NORMAL, ROLL_STARTED, f"a new pod template: restarting {brokers} broker(s) one at a time")]


def roll_finished(rolling: bool, status: Mapping[str, Any]) -> list[Event]:
    """RollFinished once a started roll has every broker on the current template and Ready."""
    if rolling and _true(status, READY) and progress_reason(status) is None:
        return [Event(NORMAL, ROLL_FINISHED, "every broker runs the current pod template and is Ready")]
    return []


def roll_events(cluster: str, live_partition: int | None, partition: int, restarting: int | None,
                waiting: str | None, was_waiting: bool) -> list[Event]:
    """The roll gate's actions: opening the StatefulSet's partition for the next broker (the
    StatefulSet controller then replaces that pod), or starting to hold it back."""
    out = []
    if restarting is not None and live_partition is not None and partition < live_partition:
        out.append(Event(NORMAL, BROKER_RESTARTING,
                         f"replacing broker {restarting} (pod {broker_pod_name(cluster, restarting)}) with the current pod template"))
    if waiting and not was_waiting:
        out.append(Event(NORMAL, ROLL_WAITING, waiting))
    return out


def orphan_events(previous: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[Event]:
    """About a KafkaCluster's OrphansRemoved condition (builders/orphans.py): OrphansRemoved when a
    pass removed what gone resources owned; OrphanRemovalFailed (a Warning) when a removal fails,
    again whenever what fails changes (not at every retry)."""
    if new is None:
        return []
    old = previous or {}
    if new.get("status") == "False":
        if old.get("status") != "False" or old.get("message") != new.get("message"):
            return [Event(WARNING, ORPHAN_REMOVAL_FAILED, new.get("message") or "")]
    elif new.get("reason") == "Removed":
        return [Event(NORMAL, ORPHANS_REMOVED, new.get("message") or "")]
    return []


def quota_events(previous: Mapping[str, Any] | None, status: Mapping[str, Any]) -> list[Event]:
    """QuotaApplied when every broker holds the quota of a new generation; QuotaNotApplied (a
    Warning naming the reason) when it could not be applied for a new reason."""
    out = pause_events(previous, status) + stalled_events(previous, status)
    old, new = _cond(previous, READY), _cond(status, READY)
    gen_changed = (previous or {}).get("observedGeneration") != status.get("observedGeneration")
    if new.get("status") == "True":
        if old.get("status") != "True" or gen_changed:
            out.append(Event(NORMAL, QUOTA_APPLIED, new.get("message") or ""))
    elif new.get("reason") not in (None, "Pending") and not _true(status, STALLED):
        if old.get("reason") != new.get("reason") or gen_changed:
            out.append(Event(WARNING, QUOTA_NOT_APPLIED, f"{new.get('reason')}: {new.get('message') or ''}"))
    return out


def user_events(previous: Mapping[str, Any] | None, status: Mapping[str, Any]) -> list[Event]:
    """UserApplied when the credential, ACLs and quotas of a new generation are in force;
    UserNotApplied (a Warning naming the reason) when they could not be for a new reason;
    QuotaConflict (a Warning) when spec.quotas newly yields to an older ClientQuota of the user."""
    out = pause_events(previous, status) + stalled_events(previous, status)
    old, new = _cond(previous, READY), _cond(status, READY)
    gen_changed = (previous or {}).get("observedGeneration") != status.get("observedGeneration")
    if new.get("status") == "True":
        if old.get("status") != "True" or gen_changed:
            out.append(Event(NORMAL, USER_APPLIED, new.get("message") or ""))
    elif new.get("reason") not in (None, "Pending") and not _true(status, STALLED):
        if old.get("reason") != new.get("reason") or gen_changed:
            out.append(Event(WARNING, USER_NOT_APPLIED, f"{new.get('reason')}: {new.get('message') or ''}"))
    conflict = status.get("quotaConflict")
    if conflict and (conflict != (previous or {}).get("quotaConflict") or gen_changed):
        out.append(Event(WARNING, QUOTA_CONFLICT, conflict))
    return out


def deletion_events(previous: Mapping[str, Any] | None, status: Mapping[str, Any], *, ran: bool,
                    deleted: int, topic: str | None) -> list[Event]:
    """RecordsDeleted for a run that deleted something; NothingToDelete for the first run of a
    generation that found nothing due; DeletionFailed when a run fails for a new reason."""
    out = stalled_events(previous, status)
    old, new = _cond(previous, READY), _cond(status, READY)
    gen_changed = (previous or {}).get("observedGeneration") != status.get("observedGeneration")
    if new.get("status") == "True" and ran:
        if deleted:
            out.append(Event(NORMAL, RECORDS_DELETED, f"topic {topic}: {new.get('message') or ''}"))
        elif gen_changed or old.get("status") != "True":
            out.append(Event(NORMAL, NOTHING_TO_DELETE, f"topic {topic}: {new.get('message') or ''}"))
    elif new.get("status") == "False" and not _true(status, STALLED):
        if old.get("reason") != new.get("reason") or gen_changed:
            out.append(Event(WARNING, DELETION_FAILED, f"{new.get('reason')}: {new.get('message') or ''}"))
    return out


def pod_problem_events(seen: set[tuple[str, str]] | None, problems: list[Any]) -> list[Event]:
    """A Warning per pod problem (builders/pod_problems.py PodProblem) not in `seen` (the keys of
    the problems the last run found): raised when a cause appears, not at every run it lasts."""
    return [Event(WARNING, p.reason, p.message) for p in problems if p.key not in (seen or set())]


def event_object(involved: Mapping[str, Any], event: Event, *, component: str, timestamp: str) -> dict[str, Any]:
    """A core/v1 Event about `involved` (a resource as read from the API), as `kubectl describe`
    lists it."""
    meta = involved.get("metadata") or {}
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta.get('name')}.", "namespace": meta.get("namespace")},
        "involvedObject": {
            "apiVersion": involved.get("apiVersion"),
            "kind": involved.get("kind"),
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": event.type,
        "reason": event.reason,
        "message": event.message[:1024],
        "source": {"component": component},
        "reportingComponent": component,
        "reportingInstance": component,
        "action": event.reason,
        "firstTimestamp": timestamp,
        "lastTimestamp": timestamp,
        "count": 1,
    }
