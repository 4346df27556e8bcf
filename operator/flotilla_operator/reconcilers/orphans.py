"""The record of what the operator applied for each KafkaUser and ClientQuota, and the pass that
removes what a gone one owned (builders/orphans.py decides). Without finalizers a deletion seen by
nobody (the operator was down, or the removal failed) would leave a revoked user its access; the
pass runs at start and at every quota resync, retries a failed removal, and reports it on the
KafkaCluster (condition OrphansRemoved, Events) rather than only in the log."""

from __future__ import annotations

import asyncio
from datetime import datetime, timezone
from typing import Any

import kopf

from .. import events as ev
from ..api.client_quota import CLIENT_QUOTA
from ..api.kafka_cluster import KAFKA_CLUSTER
from ..api.kafka_user import KAFKA_USER
from ..builders import client_quota as cq
from ..builders import kafka_user as ku
from ..builders import orphans as orph
from ..builders.common import Owner
from ..clients import kafka_admin
from ..clients.kube import ApiError, Kube
from .common import cluster_admin, emit, lock, log

CAS_ATTEMPTS = 5


class RecordError(Exception):
    """The record could not be written: nothing is applied until it is."""


async def _update(kube: Kube, namespace: str, cluster: str, change) -> None:
    """Compare-and-set the record with `change(owned) -> new owned | None (no change)`."""
    for _ in range(CAS_ATTEMPTS):
        current = await kube.get("ConfigMap", namespace, orph.record_name(cluster))
        new = change(orph.decode(current))
        if new is None:
            return
        if current is None:
            body = await kube.get(KAFKA_CLUSTER.kind, namespace, cluster)
            if body is None:
                raise RecordError(f"KafkaCluster {cluster} is gone")
            if await kube.create(orph.build_record(Owner.from_body(body), new)) is not None:
                return
            continue  # created in between: read it again
        try:
            await kube.replace({**current, "data": orph.encode(new)})
            return
        except ApiError as err:
            if err.status != 409:
                raise
    raise RecordError(f"ConfigMap {orph.record_name(cluster)} kept changing; retrying")


async def record(kube: Kube, namespace: str, cluster: str, entry: orph.Owned) -> None:
    """Before the first apply of what `entry` names: a crash between the two leaves a record of
    nothing applied (harmless), never something applied and unrecorded."""
    await _update(kube, namespace, cluster, lambda owned: orph.with_entry(owned, entry))


async def forget(kube: Kube, namespace: str, cluster: str, uid: str) -> None:
    """After a deleted owner's removal succeeded; if the record cannot be written, the orphan pass
    removes (again, harmlessly) and drops it."""
    try:
        await _update(kube, namespace, cluster, lambda owned: orph.without(owned, [uid]) if uid in owned else None)
    except RecordError as exc:
        log.warning("KafkaCluster %s/%s: %s", namespace, cluster, exc)


async def remove_orphans(memo: kopf.Memo, namespace: str, cluster: str) -> None:
    """One pass over one cluster: remove what recorded owners that are gone owned, drop them from
    the record, and report on the KafkaCluster. The record is read before the resources are
    listed, so a resource recorded in between is listed as live."""
    kube: Kube = memo["kube"]
    owned = orph.decode(await kube.get("ConfigMap", namespace, orph.record_name(cluster)))
    removals = orph.orphans(owned, cluster, await kube.list(KAFKA_USER.kind, namespace),
                            await kube.list(CLIENT_QUOTA.kind, namespace)) if owned else []
    body = await kube.get(KAFKA_CLUSTER.kind, namespace, cluster)
    previous = next((c for c in ((body or {}).get("status") or {}).get("conditions") or ()
                     if c.get("type") == orph.CONDITION), None)
    if body is None or (not removals and previous is None):
        return
    removed: list[orph.Owned] = []
    failed: list[tuple[orph.Owned, str]] = []
    if removals:
        bootstrap, auth, why = await cluster_admin(memo, namespace, cluster, require_ready=False)
        if bootstrap:  # one wait for a cluster that does not answer, not one per removal
            try:
                await kafka_admin.brokers(bootstrap, auth)
            except kafka_admin.AdminError as exc:
                bootstrap, why = None, str(exc)
        for r in removals:
            if not bootstrap:
                failed.append((r.owned, why))
                continue
            try:
                await _remove(memo, namespace, r, bootstrap, auth)
                removed.append(r.owned)
                log.info("KafkaCluster %s/%s: removed %s", namespace, cluster, orph.removal_summary(r))
            except (kafka_admin.AdminError, ApiError) as exc:
                failed.append((r.owned, str(exc)))
                log.warning("KafkaCluster %s/%s: removing %s failed: %s", namespace, cluster,
                            orph.removal_summary(r), exc)
        if removed:
            try:
                await _update(kube, namespace, cluster, lambda o: orph.without(o, [x.uid for x in removed]))
            except (ApiError, RecordError) as exc:  # removed again, harmlessly, next pass
                log.warning("KafkaCluster %s/%s: updating %s: %s", namespace, cluster, orph.record_name(cluster), exc)
    await _report(memo, namespace, cluster, removed, failed)


async def _remove(memo: kopf.Memo, namespace: str, r: orph.Removal, bootstrap: str,
                  auth: kafka_admin.AdminAuth) -> None:
    """A gone KafkaUser's credential and its principal's ACLs (under that user's lock, if no
    KafkaUser of that name has appeared since the listing), and the quota entity it owned."""
    o = r.owned
    if r.credential_and_acls:
        locks: dict[tuple, asyncio.Lock] = memo["locks"]
        async with locks.setdefault((KAFKA_USER.kind, namespace, o.name), asyncio.Lock()):
            again = await memo["kube"].get(KAFKA_USER.kind, namespace, o.name)
            if again is None or again["metadata"].get("deletionTimestamp") or again["metadata"]["uid"] == o.uid:
                await kafka_admin.alter_scram_credential(bootstrap, str(o.user), ku.MECHANISM_CODE, None, auth)
                held = await kafka_admin.describe_acls(bootstrap, ku.principal(str(o.user)), auth)
                await kafka_admin.delete_acls(bootstrap, held, auth)
    if r.quota_entity is not None:
        await kafka_admin.alter_client_quota(bootstrap, dict(r.quota_entity), cq.removal_ops(), auth)


async def _report(memo: kopf.Memo, namespace: str, cluster: str, removed: list[orph.Owned],
                  failed: list[tuple[orph.Owned, str]]) -> None:
    """OrphansRemoved on the KafkaCluster, and its Events; under the cluster's lock, as every
    status write of the cluster, so neither overwrites the other's conditions."""
    kube: Kube = memo["kube"]
    async with lock(memo, namespace, cluster):
        body = await kube.get(KAFKA_CLUSTER.kind, namespace, cluster)
        if body is None:
            return
        conditions = list((body.get("status") or {}).get("conditions") or ())
        old = next((c for c in conditions if c.get("type") == orph.CONDITION), None)
        new = orph.removed_condition(conditions, removed, failed, generation=int(body["metadata"].get("generation") or 1),
                                     now=datetime.now(timezone.utc))
        if new is None:
            return
        if old is None or any(old.get(k) != new.get(k) for k in ("status", "reason", "message")):
            kept = [c for c in conditions if c.get("type") != orph.CONDITION]
            await kube.patch_status(KAFKA_CLUSTER.kind, namespace, cluster, {"conditions": kept + [new]})
    await emit(kube, body, ev.orphan_events(old, new))
