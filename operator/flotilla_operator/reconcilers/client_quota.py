"""ClientQuota (KIP-13): applied with AlterClientQuotas through the cluster's own bootstrap address,
its status per broker from DescribeClientQuotas; removed when its deletion is seen (no finalizer:
nothing holds a namespace deletion), or by the orphan pass when it was not (reconcilers/orphans.py). Two resources naming one entity: the oldest wins, the others
report Conflict (builders/client_quota.py decides)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import kopf

from .. import events as ev
from .. import metrics
from ..annotations import paused
from ..api.client_quota import CLIENT_QUOTA
from ..api.common import parse_spec
from ..api.kafka_user import KAFKA_USER
from ..builders import client_quota as cq
from ..builders import orphans as orph
from ..clients import kafka_admin
from ..clients.kube import Kube
from ..status import condition, paused_status, same_status, stalled_condition
from . import orphans
from .common import cluster_admin, emit, while_unreachable

async def reconcile_client_quota(memo: kopf.Memo, body: kopf.Body) -> None:
    """Apply the quota if this resource owns its entity, then report what each broker holds."""
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    if paused(meta):
        previous = dict(body.get("status") or {})
        status = paused_status(previous, generation=int(meta.get("generation") or 1))
        if not same_status(previous, status):
            await memo["kube"].patch_status(CLIENT_QUOTA.kind, meta["namespace"], meta["name"], status)
        await emit(memo["kube"], dict(body), ev.pause_events(previous, status))
        return
    with metrics.observe(CLIENT_QUOTA.kind):
        try:
            parse_spec(CLIENT_QUOTA, spec)
        except ValueError as exc:
            await _quota_status(memo, body, False, "Invalid", str(exc), None)
            return
        owner = await quota_owner(memo["kube"], CLIENT_QUOTA.kind, dict(body))
        entity, cluster = cq.entity_of(spec), spec["clusterRef"]["name"]
        if owner != (CLIENT_QUOTA.kind, meta["name"]):
            await _quota_status(memo, body, False, "Conflict",
                                f"{owner[0]} {owner[1]} already sets the quota of {entity} in "
                                f"cluster {cluster}; this one is not applied", None)
            return
        bootstrap, auth, why = await cluster_admin(memo, meta["namespace"], cluster, require_ready=False)
        if not bootstrap:
            await _quota_status(memo, body, False, "Pending", why, None)
            return
        desired = cq.desired_ops(spec)
        try:  # recorded before it is applied: the orphan pass removes it if the deletion goes unseen
            await orphans.record(memo["kube"], meta["namespace"], cluster, orph.quota_entry(body))
        except orphans.RecordError as exc:
            await _quota_status(memo, body, False, "Pending", str(exc), None)
            return
        try:
            await kafka_admin.alter_client_quota(bootstrap, entity, desired, auth)
            brokers = await kafka_admin.brokers(bootstrap, auth)
        except kafka_admin.AdminError as exc:
            await _quota_status(memo, body, False, "Unreachable", str(exc), None)
            return
        rows, applied = [], 0
        for b in brokers:
            try:
                held = await kafka_admin.describe_client_quota(b.address, entity, auth)
                rows.append(cq.broker_status(b.node_id, held, None))
                applied += cq.applied_matches(desired, held)
            except kafka_admin.AdminError as exc:
                rows.append(cq.broker_status(b.node_id, None, str(exc)))
        ready = bool(brokers) and applied == len(brokers)
        await _quota_status(memo, body, ready, "Applied" if ready else "Pending",
                            f"{applied} of {len(brokers)} broker(s) apply it", rows)


async def remove_client_quota(memo: kopf.Memo, body: kopf.Body) -> None:
    """A deleted ClientQuota's quota, removed from its cluster if this resource owned the entity
    (one that lost a conflict never applied anything); retried while the cluster is briefly
    unreachable, then the last AdminError (or ApiError) is raised."""
    metrics.forget_resource(CLIENT_QUOTA.kind, body["metadata"]["namespace"], body["metadata"]["name"])
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    try:
        parse_spec(CLIENT_QUOTA, spec)
    except ValueError:
        return
    ns, cluster = meta["namespace"], spec["clusterRef"]["name"]
    if await quota_owner(memo["kube"], CLIENT_QUOTA.kind, dict(body)) == (CLIENT_QUOTA.kind, meta["name"]):
        bootstrap, auth, _ = await cluster_admin(memo, ns, cluster, require_ready=False)
        if not bootstrap:
            return  # no cluster to hold it, or the orphan pass removes it once there is
        entity = cq.entity_of(spec)
        await while_unreachable(lambda: kafka_admin.alter_client_quota(bootstrap, entity, cq.removal_ops(), auth))
    await orphans.forget(memo["kube"], ns, cluster, meta["uid"])


async def quota_owner(kube: Kube, kind: str, body: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of the resource owning the quotas `body` sets: ClientQuotas and KafkaUsers with
    quotas of its namespace compete for an entity (builders/client_quota.owner_of)."""
    ns = body["metadata"]["namespace"]
    return cq.owner_of(body, await kube.list(CLIENT_QUOTA.kind, ns), await kube.list(KAFKA_USER.kind, ns), kind=kind)


async def _quota_status(memo: kopf.Memo, body: kopf.Body, ready: bool, reason: str, message: str,
                        brokers: list[dict[str, Any]] | None) -> None:
    meta = body["metadata"]
    previous = dict(body.get("status") or {})
    gen = int(meta.get("generation") or 1)
    now = datetime.now(timezone.utc)
    status: dict[str, Any] = {"observedGeneration": gen, "conditions": [
        condition("Ready", ready, reason, message, generation=gen, now=now, previous=previous.get("conditions")),
        stalled_condition(None if ready else reason, message, generation=gen, now=now,
                          previous=previous.get("conditions")),
    ]}
    if brokers is not None:
        status["brokers"] = brokers
    if not same_status(previous, status):
        await memo["kube"].patch_status(CLIENT_QUOTA.kind, meta["namespace"], meta["name"], status)
    await emit(memo["kube"], dict(body), ev.quota_events(previous, status))
