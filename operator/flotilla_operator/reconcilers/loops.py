"""The operator's periodic passes: one asyncio task each for the whole operator, not a kopf timer
per resource (kopf puts a finalizer on every resource that has a timer, and a finalizer holds a
namespace deletion for as long as the operator is away). startup() in handlers.py starts them."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import kopf

from ..api.client_quota import CLIENT_QUOTA
from ..api.kafka_cluster import KAFKA_CLUSTER
from ..api.kafka_user import KAFKA_USER
from ..settings import Settings
from .client_quota import reconcile_client_quota
from .common import log
from .kafka_cluster import reconcile
from .kafka_user import reconcile_kafka_user
from .orphans import remove_orphans
from .rebalance import REBALANCE_POLL_S, rebalance_step

QUOTA_RESYNC_S = 10.0  # every ClientQuota and KafkaUser re-applied, orphans removed (quota_resync_loop)


async def for_each(memo: kopf.Memo, kind: str, what: str, act: Callable[[dict[str, Any]], Awaitable[None]],
                   *, skip_deleting: bool = False) -> None:
    """`act` on every object of `kind` in the watched namespaces: the body of each loop. A failure
    is logged and the loop goes on to the next object, and through API hiccups."""
    op: Settings = memo["settings"]
    try:
        objects: list[dict[str, Any]] = []
        for ns in op.namespaces or (None,):
            objects += await memo["kube"].list(kind, ns)
    except Exception as exc:
        log.warning("%s: listing %ss failed: %s", what, kind, exc)
        return
    for obj in objects:
        meta = obj["metadata"]
        if skip_deleting and meta.get("deletionTimestamp"):
            continue
        try:
            await act(obj)
        except Exception as exc:
            log.warning("%s of %s %s/%s failed: %s", what, kind, meta.get("namespace"), meta["name"], exc)


async def resync_loop(memo: kopf.Memo) -> None:
    """Re-apply every KafkaCluster every `resync_seconds`: repairs edited or deleted children."""
    op: Settings = memo["settings"]
    while True:
        await asyncio.sleep(op.resync_seconds)
        await for_each(memo, KAFKA_CLUSTER.kind, "resync", lambda c: reconcile(
            memo, c["metadata"]["namespace"], c["metadata"]["name"], why="resync"))


async def quota_resync_loop(memo: kopf.Memo) -> None:
    """At start and every QUOTA_RESYNC_S, remove what gone KafkaUsers and ClientQuotas owned in
    each cluster (reconcilers/orphans.py: deletions the operator did not see, removals that
    failed); then every QUOTA_RESYNC_S re-apply and re-read every ClientQuota (brokers that
    joined, a conflict's owner that went away, status drift) and every KafkaUser (ACLs or a
    credential changed behind the operator's back, a cluster that became reachable)."""
    while True:
        await for_each(memo, KAFKA_CLUSTER.kind, "orphan removal", lambda c: remove_orphans(
            memo, c["metadata"]["namespace"], c["metadata"]["name"]), skip_deleting=True)
        await asyncio.sleep(QUOTA_RESYNC_S)
        await for_each(memo, CLIENT_QUOTA.kind, "resync", lambda q: reconcile_client_quota(memo, q),
                       skip_deleting=True)
        await for_each(memo, KAFKA_USER.kind, "resync", lambda u: reconcile_kafka_user(
            memo, u["metadata"]["namespace"], u["metadata"]["name"]), skip_deleting=True)


async def rebalance_loop(memo: kopf.Memo) -> None:
    """Every REBALANCE_POLL_S, a rebalance step for each KafkaCluster (most return at once: nothing
    to move)."""
    while True:
        await asyncio.sleep(REBALANCE_POLL_S)
        await for_each(memo, KAFKA_CLUSTER.kind, "rebalance", lambda c: rebalance_step(
            memo, c["metadata"]["namespace"], c["metadata"]["name"]))
