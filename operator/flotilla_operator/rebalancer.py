"""One rebalance step for one KafkaCluster: read the cluster, let builders/rebalance.py decide,
carry it out, write status.rebalance and the Rebalancing condition. The handlers' rebalance loop
calls it every REBALANCE_POLL_S for each cluster that may have something to move.

Order within a step: throttles before the moves they cover; preferred elections after the
reorders they follow; at the end, elections before the throttles go. A request the cluster
refuses is reported in the status message and retried at the next step (the plan kept in
`<cluster>-rebalance-plan` is kept first, so that step heads for the same target: nothing is lost
or done twice).
"""

from __future__ import annotations

import logging
from typing import Any

from .clients import reassignment_admin as ra
from .clients.kube import ApiError, Kube
from .builders import rebalance as rb
from .builders import rebalance_target
from .builders.common import Owner
from .clients.kafka_admin import PLAINTEXT, AdminAuth, AdminError

log = logging.getLogger("flotilla_operator")


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
