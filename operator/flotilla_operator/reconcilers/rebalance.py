"""One rebalance step for one KafkaCluster (`rebalance_step`): read the cluster, let
builders/rebalance.py decide, carry it out, write status.rebalance and the Rebalancing condition.
The rebalance loop (loops.py) calls it every REBALANCE_POLL_S for each cluster that may have
something to move.

Order within a step: throttles before the moves they cover; preferred elections after the
reorders they follow; at the end, elections before the throttles go. A request the cluster
refuses is reported in the status message and retried at the next step (the plan kept in
`<cluster>-rebalance-plan` is kept first, so that step heads for the same target: nothing is lost
or done twice).
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import kopf

from .. import events as ev
from .. import metrics
from ..annotations import paused
from ..api.common import parse_spec
from ..api.kafka_cluster import KAFKA_CLUSTER, KafkaClusterSpec
from ..builders import rebalance as rb
from ..builders import rebalance_target
from ..builders.common import Owner, statefulset_name
from ..clients import reassignment_admin as ra
from ..clients.kafka_admin import PLAINTEXT, AdminAuth, AdminError
from ..clients.kube import ApiError, Kube
from ..status import with_rebalance
from .common import cluster_admin, emit, lock, log
from .kafka_cluster import refresh_status

REBALANCE_POLL_S = 2.0  # how often a cluster that may have something to move is looked at
REBALANCE_RETRY_S = 10.0  # after its Kafka could not be reached


async def rebalance_step(memo: kopf.Memo, namespace: str, name: str) -> None:
    """One step of one cluster's rebalance. The cluster is read outside the per-cluster lock (an
    unreachable one may take a while to say so); deciding, acting and writing status inside it.
    Only this loop moves replicas, so the view cannot go stale in between."""
    kube: Kube = memo["kube"]
    key = (namespace, name)
    body = await kube.get(KAFKA_CLUSTER.kind, namespace, name)
    if body is None:
        return
    sts_name = statefulset_name(Owner.from_body(body))
    inp = _rebalance_inputs(body, await kube.get("StatefulSet", namespace, sts_name))
    retry: dict[tuple[str, str], float] = memo.setdefault("rebalance_retry", {})
    loop = asyncio.get_running_loop()
    if inp is None or not rb.needs_cluster(inp) or retry.get(key, 0.0) > loop.time():
        return
    bootstrap, auth, why = await cluster_admin(memo, namespace, name, require_ready=False)
    cluster = None
    if bootstrap:
        try:
            cluster = await observe(bootstrap, auth)
        except AdminError as exc:
            why = str(exc)
    async with lock(memo, namespace, name):
        body = await kube.get(KAFKA_CLUSTER.kind, namespace, name)
        kept = rebalance_target.decode(await kube.get("ConfigMap", namespace, rebalance_target.configmap_name(name)))
        inp = None if body is None else _rebalance_inputs(body, await kube.get("StatefulSet", namespace, sts_name), kept)
        if inp is None:
            return
        if cluster is None:
            retry[key] = loop.time() + REBALANCE_RETRY_S
            new = rb.unreachable(inp, why)
        else:
            retry.pop(key, None)
            step = rb.decide(inp, view_of(cluster), datetime.now(timezone.utc))
            assert bootstrap is not None
            new = await keep_then_carry_out(kube, Owner.from_body(body), bootstrap, cluster, step, dict(inp.previous))
        previous = dict(inp.previous)
        if new is None or new == previous:
            return
        if new.get("phase") != previous.get("phase") or new.get("message") != previous.get("message"):
            log.info("KafkaCluster %s/%s: rebalance %s: %s", namespace, name, new.get("phase"), new.get("message"))
        await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, with_rebalance(
            body.get("status"), new, generation=int(body["metadata"].get("generation") or 1)))
        await emit(kube, body, ev.rebalance_events(previous, new))
        metrics.observe_rebalance(namespace, name, new)
    if new.get("phase") != previous.get("phase") or key in memo.get("scale_blocked", ()):
        # The Ready/Reconciling/ScaleDownBlocked conditions follow the rebalance (Draining or blocked).
        await refresh_status(memo, namespace, name)


def _rebalance_inputs(body: dict[str, Any], statefulset: dict[str, Any] | None,
                      kept: rebalance_target.Target | None = None) -> rb.Inputs | None:
    meta = body.get("metadata") or {}
    if meta.get("deletionTimestamp") or paused(meta):
        return None
    try:
        spec = parse_spec(KAFKA_CLUSTER, body.get("spec") or {})
    except ValueError:
        return None  # reconcile() reports it
    assert isinstance(spec, KafkaClusterSpec)
    return rb.inputs_from(body, statefulset, desired=spec.replicas, throttle=spec.rebalance.throttle_bytes_per_second,
                          max_in_flight=spec.rebalance.max_partition_moves_in_flight, kept=kept)


def view_of(cluster: ra.ClusterView) -> rb.View:
    return rb.View(registered=frozenset(cluster.brokers), replicas=cluster.replicas, leaders=cluster.leaders,
                   in_flight={p: (r.original, r.target) for p, r in cluster.reassigning.items()},
                   racks=cluster.racks or None)


async def observe(bootstrap: str, auth: AdminAuth = PLAINTEXT) -> ra.ClusterView:
    return await ra.cluster_view(bootstrap, auth)


async def carry_out(bootstrap: str, cluster: ra.ClusterView, step: rb.Step, previous: dict[str, Any]) -> dict[str, Any]:
    """Do what `step` says; the status.rebalance to write: the step's, with bytesToMove for a new
    plan and what the cluster refused; on an error, the step's at the moves (throttles recorded
    even if not all were set: removing an unset one is harmless) or the previous one at the end
    (the throttles are still to be removed), with the error."""
    status = dict(step.status)
    done = status.get("phase") == rb.IDLE
    try:
        if step.copies:
            sizes = await ra.partition_sizes(cluster)
            status["bytesToMove"] = sum(sizes.get(p, 0) * n for p, n in step.copies.items())
        if not done:
            await ra.alter_configs(bootstrap, cluster, step.configs)
        refused = await ra.alter_reassignments(cluster, step.start)
        failed = await ra.elect_preferred(cluster, list(step.elect))
        if failed:
            log.info("preferred elections not done (the auto leader rebalance or a later step retries): %s", failed)
        if done:
            await ra.alter_configs(bootstrap, cluster, step.configs)
    except AdminError as exc:
        base = dict(previous) if done else status
        return {**base, "message": f"{step.status.get('message') or ''}; {exc}".lstrip("; ")}
    if refused:
        shown = "; ".join(f"{t}-{p}: {why}" for (t, p), why in sorted(refused.items())[:5])
        status["message"] = f"{status.get('message') or ''}; refused: {shown}".lstrip("; ")
    return status


async def keep_then_carry_out(kube: Kube, owner: Owner, bootstrap: str, cluster: ra.ClusterView, step: rb.Step,
                              previous: dict[str, Any]) -> dict[str, Any]:
    """`carry_out`, once a new or extended plan is kept: nothing starts towards a target that a
    later step, or an operator started again, would not find."""
    if step.keep is not None:
        try:
            await kube.apply(rebalance_target.configmap(owner, step.keep))
        except ApiError as exc:
            return {**previous, "message": f"cannot keep the rebalance plan in ConfigMap "
                    f"{rebalance_target.configmap_name(owner.name)}: {exc}"}
    return await carry_out(bootstrap, cluster, step, previous)
