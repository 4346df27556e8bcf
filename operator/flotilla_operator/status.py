"""Status of a KafkaCluster, computed from what its StatefulSet and the brokers' Leases report.
Pure: no I/O.

Four conditions, shaped like metav1.Condition, each with its observedGeneration:

- Ready: every broker exists, runs the current configuration and passes its readiness probe.
- Reconciling: the operator (or the StatefulSet controller) is still moving towards the spec:
  creating, scaling, or rolling brokers one at a time.
- Degraded: something is wrong that waiting will not fix by itself: an error while applying the
  objects, an invalid spec, a broker not ready although nothing is rolling, or a pod-level cause
  (builders/pod_problems.py: an image that cannot be pulled, an unschedulable pod, a claim left
  Pending, a crash loop), which Ready names too instead of only "0/3 brokers ready".
- Stalled (kstatus' convention, so Flux fails fast): the spec cannot be reconciled as written
  (invalid spec or broker configuration, a cluster id other than the volumes'); only a change of
  the spec ends it.

OrphansRemoved is written by the orphan pass alone (builders/orphans.py); every status computed
here carries it over from the previous status, as the status written is a merge patch that
replaces the whole list.

While the pause annotation is set (annotations.py), `paused_status` keeps the last status and
adds ReconciliationPaused (every kind).

lastTransitionTime changes only when a condition's status changes.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from .builders.common import CONFIG_HASH_ANNOTATION, Owner, bootstrap_address, parse_time, selector_string
from .builders.pod_problems import PodProblem, summary
from .builders.roll import RollDecision
from .builders import rebalance as rb
from .builders.scale_down import BLOCKED_REASON, SCALE_DOWN_BLOCKED, ScaleDecision

READY = "Ready"
RECONCILING = "Reconciling"
DEGRADED = "Degraded"
STALLED = "Stalled"
PAUSED = "ReconciliationPaused"
#: Written by the orphan pass (reconcilers/orphans.py), kept as is by every other status write.
ORPHANS_REMOVED = "OrphansRemoved"
#: Errors that no retry fixes: the spec must change.
STALLING_REASONS = frozenset({"InvalidSpec", "InvalidConfig", "Invalid", "Conflict"})
PAUSED_MESSAGE = "the flotilla.io/pause-reconciliation annotation is set: the operator changes nothing"


def _ts(now: datetime) -> str:
    return now.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def condition(
    type_: str,
    status: bool,
    reason: str,
    message: str,
    *,
    generation: int,
    now: datetime,
    previous: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One condition; keeps the previous lastTransitionTime when the status did not change."""
    value = "True" if status else "False"
    last = _ts(now)
    for old in previous or []:
        if old.get("type") == type_ and old.get("status") == value and old.get("lastTransitionTime"):
            last = old["lastTransitionTime"]
    return {
        "type": type_,
        "status": value,
        "reason": reason,
        "message": message,
        "lastTransitionTime": last,
        "observedGeneration": generation,
    }


def kafka_cluster_status(
    owner: Owner,
    *,
    replicas: int,
    port: int,
    config_hash: str | None,
    statefulset: dict[str, Any] | None,
    previous: dict[str, Any] | None = None,
    error: str | None = None,
    error_reason: str = "ReconcileFailed",
    now: datetime | None = None,
    leases: list[dict[str, Any]] | None = None,
    scale: ScaleDecision | None = None,
    cluster_id: str | None = None,
    roll: RollDecision | None = None,
    pod_problems: list[PodProblem] | None = None,
) -> dict[str, Any]:
    """The whole .status of a KafkaCluster (status.rebalance, written by the rebalancer, is read
    from `previous` and kept) (with `leases`, also who is registered and controller;
    with a blocked `scale`, a ScaleDownBlocked condition, which is absent otherwise; with a held
    `roll`, why the next broker waits; with `pod_problems` (builders/pod_problems.py) while not
    every broker is ready, Ready=False and Degraded=True name the first one's reason and list them)."""
    now = now or datetime.now(timezone.utc)
    prev_conditions = (previous or {}).get("conditions") or []
    rebalance = (previous or {}).get("rebalance")
    gen = owner.generation
    sts = statefulset or {}
    st = sts.get("status") or {}
    sts_gen = (sts.get("metadata") or {}).get("generation")
    have = int(st.get("replicas") or 0)
    ready = int(st.get("readyReplicas") or 0)
    updated = int(st.get("updatedReplicas") or 0)
    observed = st.get("observedGeneration")
    template_hash = (
        ((sts.get("spec") or {}).get("template") or {}).get("metadata", {}).get("annotations", {}).get(CONFIG_HASH_ANNOTATION)
    )

    exists = bool(sts)
    seen = exists and observed is not None and sts_gen is not None and observed >= sts_gen
    current_template = config_hash is None or template_hash == config_hash
    rolled = seen and st.get("updateRevision") is not None and st.get("currentRevision") == st.get("updateRevision")
    rolled = rolled and updated >= replicas
    scaled = seen and have == replicas
    all_ready = ready >= replicas and have == replicas

    if not exists:
        progress, progress_msg = "Creating", "creating the broker StatefulSet"
    elif not seen or not current_template:
        progress, progress_msg = "ApplyingChanges", "waiting for the StatefulSet controller to see the new spec"
    elif scale is not None and scale.blocked and rb.draining(rebalance):
        nodes = ", ".join(str(n) for n in scale.blocked_nodes)
        progress, progress_msg = "Draining", (f"moving replicas off broker(s) {nodes} before removing them: "
                                              f"{(rebalance or {}).get('message') or ''}").rstrip(": ")
    elif scale is not None and scale.blocked:
        progress, progress_msg = SCALE_DOWN_BLOCKED, scale.message()
        if (rebalance or {}).get("message"):
            progress_msg += f"; {rebalance['message']}"
    elif not scaled:
        progress, progress_msg = "Scaling", f"{have} brokers, want {replicas}"
    elif not rolled:
        progress, progress_msg = "RollingUpdate", f"{updated}/{replicas} brokers updated, one at a time"
        if roll is not None and roll.blocked:
            progress_msg += f"; {roll.waiting}"
    else:
        progress, progress_msg = None, ""

    problems = [] if error or all_ready else list(pod_problems or ())
    problem_msg = f"{ready}/{replicas} brokers ready: {summary(problems)}" if problems else ""

    if error:
        ready_c = condition(READY, False, error_reason, error, generation=gen, now=now, previous=prev_conditions)
    elif problems:
        ready_c = condition(READY, False, problems[0].reason, problem_msg, generation=gen, now=now,
                            previous=prev_conditions)
    elif progress is None and all_ready:
        ready_c = condition(
            READY, True, "BrokersReady", f"{ready}/{replicas} brokers ready", generation=gen, now=now, previous=prev_conditions
        )
    else:
        reason = progress or "BrokersNotReady"
        msg = progress_msg or f"{ready}/{replicas} brokers ready"
        ready_c = condition(READY, False, reason, msg, generation=gen, now=now, previous=prev_conditions)

    reconciling_c = condition(
        RECONCILING,
        progress is not None,
        progress or "Converged",
        progress_msg or "the brokers match the spec",
        generation=gen,
        now=now,
        previous=prev_conditions,
    )

    if error:
        degraded_c = condition(DEGRADED, True, error_reason, error, generation=gen, now=now, previous=prev_conditions)
    elif problems:
        degraded_c = condition(DEGRADED, True, problems[0].reason, problem_msg, generation=gen, now=now,
                               previous=prev_conditions)
    elif progress is None and not all_ready:
        degraded_c = condition(
            DEGRADED,
            True,
            "BrokersNotReady",
            f"{ready}/{replicas} brokers ready while nothing is rolling",
            generation=gen,
            now=now,
            previous=prev_conditions,
        )
    else:
        degraded_c = condition(DEGRADED, False, "AsExpected", "", generation=gen, now=now, previous=prev_conditions)

    conditions = [ready_c, reconciling_c, degraded_c,
                  stalled_condition(error_reason if error else None, error or "", generation=gen, now=now,
                                    previous=prev_conditions)]
    if progress == SCALE_DOWN_BLOCKED:
        # Dropped from the list once the scale-down may go on: a merge patch replaces the list.
        conditions.append(condition(SCALE_DOWN_BLOCKED, True, BLOCKED_REASON, progress_msg,
                                    generation=gen, now=now, previous=prev_conditions))
    rebalancing = rebalancing_condition(rebalance, generation=gen, now=now, previous=prev_conditions)
    if rebalancing is not None:
        conditions.append(rebalancing)
    conditions += [c for c in prev_conditions if c.get("type") == ORPHANS_REMOVED]
    status: dict[str, Any] = {
        "observedGeneration": gen,
        "conditions": conditions,
        "replicas": have,
        "readyReplicas": ready,
        "updatedReplicas": updated,
        "bootstrapServers": bootstrap_address(owner, port),
        "selector": selector_string(owner),
    }
    if config_hash is not None:
        status["configHash"] = config_hash
    if cluster_id is not None:
        status["clusterId"] = cluster_id
    if leases is not None:
        status.update(metadata_status(leases, now))
        # A merge patch removes the controller only if told so explicitly.
        status.setdefault("controller", None)
    return status


def rebalancing_condition(rebalance: dict[str, Any] | None, *, generation: int, now: datetime,
                          previous: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """Rebalancing: True while replicas move (reason ScaleUp, ScaleDown or Requested), False with
    the phase as reason otherwise; absent until the rebalancer first writes status.rebalance."""
    fields = rb.condition_fields(rebalance)
    if fields is None:
        return None
    value, reason, message = fields
    return condition(rb.CONDITION, value, reason, message, generation=generation, now=now, previous=previous)


def with_rebalance(previous: dict[str, Any] | None, rebalance: dict[str, Any], *, generation: int,
                   now: datetime | None = None) -> dict[str, Any]:
    """The status patch a rebalance step writes: status.rebalance (keys it dropped set to None, as
    a merge patch needs) and the conditions with Rebalancing replaced."""
    now = now or datetime.now(timezone.utc)
    old = dict((previous or {}).get("rebalance") or {})
    patch = {k: None for k in old if k not in rebalance}
    patch.update(rebalance)
    conditions = [c for c in (previous or {}).get("conditions") or () if c.get("type") != rb.CONDITION]
    rebalancing = rebalancing_condition(rebalance, generation=generation, now=now,
                                        previous=(previous or {}).get("conditions"))
    return {"rebalance": patch, "conditions": conditions + ([rebalancing] if rebalancing else [])}


def stalled_condition(reason: str | None, message: str, *, generation: int, now: datetime,
                      previous: list[dict[str, Any]] | None, force: bool = False) -> dict[str, Any]:
    """Stalled: True for an error in STALLING_REASONS (the spec must change), or for any `reason`
    with `force` (the caller knows no retry helps); False otherwise."""
    if reason is not None and (force or reason in STALLING_REASONS):
        return condition(STALLED, True, reason, message, generation=generation, now=now, previous=previous)
    return condition(STALLED, False, "AsExpected", "", generation=generation, now=now, previous=previous)


def paused_status(previous: dict[str, Any] | None, *, generation: int, now: datetime | None = None) -> dict[str, Any]:
    """The status of a paused resource: what was last observed, plus ReconciliationPaused=True
    (and Reconciling=False: nothing moves). observedGeneration follows the object: the operator
    saw this generation and chose to do nothing, so kstatus does not wait for it forever."""
    now = now or datetime.now(timezone.utc)
    previous = dict(previous or {})
    old = list(previous.get("conditions") or [])
    kept = [c for c in old if c.get("type") not in (PAUSED, RECONCILING)]
    paused = condition(PAUSED, True, PAUSED, PAUSED_MESSAGE, generation=generation, now=now, previous=old)
    extra = []
    if any(c.get("type") == RECONCILING for c in old):
        extra.append(condition(RECONCILING, False, PAUSED, PAUSED_MESSAGE, generation=generation, now=now, previous=old))
    return {**previous, "observedGeneration": generation, "conditions": kept + extra + [paused]}


def resumed_status(previous: dict[str, Any] | None) -> dict[str, Any]:
    """A paused status without its ReconciliationPaused condition (for kinds whose next run may be
    far off: a RecordDeletion's)."""
    previous = dict(previous or {})
    kept = [c for c in previous.get("conditions") or () if c.get("type") != PAUSED]
    return {**previous, "conditions": kept}


def is_paused(status: dict[str, Any] | None) -> bool:
    return any(c.get("type") == PAUSED and c.get("status") == "True" for c in (status or {}).get("conditions") or ())


def metadata_status(leases: list[dict[str, Any]], now: datetime | None = None) -> dict[str, Any]:
    """registeredBrokers and controller from the cluster's Leases (broker/metadata/kube_objects.py):
    a Lease counts while its holder renewed it within leaseDurationSeconds (by this clock; the
    brokers themselves judge by when they saw renewals, so this view may lag by clock skew)."""
    now = now or datetime.now(timezone.utc)
    registered, controller = 0, None
    for lease in leases:
        spec = lease.get("spec") or {}
        role = ((lease.get("metadata") or {}).get("labels") or {}).get("flotilla.io/lease")
        renewed = parse_time(spec.get("renewTime"))
        holder = spec.get("holderIdentity")
        if not holder or renewed is None:
            continue
        if (now - renewed).total_seconds() > float(spec.get("leaseDurationSeconds") or 0):
            continue
        if role == "broker":
            registered += 1
        elif role == "controller" and str(holder).isdigit():
            controller = int(holder)
    out: dict[str, Any] = {"registeredBrokers": registered}
    if controller is not None:
        out["controller"] = controller
    return out


def same_status(old: dict[str, Any] | None, new: dict[str, Any]) -> bool:
    """True when writing `new` would change nothing a reader cares about."""
    if not old:
        return False
    return all(old.get(k) == v for k, v in new.items())
