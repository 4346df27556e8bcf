"""What every reconciler shares: the per-cluster lock that serialises them, posting Events, a
cluster's own objects (by label), and how to reach a cluster's Kafka as the operator."""

from __future__ import annotations

import asyncio
import logging
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable, TypeVar

import kopf

from .. import events as ev
from ..admin_address import admin_address
from ..api.kafka_cluster import KAFKA_CLUSTER
from ..builders.common import cluster_selector
from ..clients import kafka_admin
from ..clients.credentials import CredentialsError, ensure_admin_auth
from ..clients.kube import Kube

log = logging.getLogger("flotilla_operator")

RETRY_DELAY = 10.0
EVENT_COMPONENT = "flotilla-operator"
LEASE_ROLE_LABEL = "flotilla.io/lease"  # on the brokers' Leases: broker or controller
REMOVAL_ATTEMPTS = 6  # what a deleted ClientQuota or KafkaUser set: tried for about half a minute

T = TypeVar("T")


def lock(memo: kopf.Memo, namespace: str, name: str) -> asyncio.Lock:
    """One asyncio.Lock per KafkaCluster: every run that reads and writes it (or acts on its Kafka)
    holds it, and reads the latest object first, so a slow run never applies an older spec."""
    locks: dict[tuple[str, str], asyncio.Lock] = memo["locks"]
    return locks.setdefault((namespace, name), asyncio.Lock())


async def emit(kube: Kube, involved: dict[str, Any], events: list[ev.Event]) -> None:
    """Post `events` about `involved`; an Event that cannot be posted is logged, never fatal."""
    for event in events:
        log.info("%s %s/%s: %s %s", involved.get("kind"), involved.get("metadata", {}).get("namespace"),
                 involved.get("metadata", {}).get("name"), event.reason, event.message)
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        try:
            await kube.post_event(ev.event_object(involved, event, component=EVENT_COMPONENT, timestamp=stamp))
        except Exception as exc:  # an Event is a courtesy: the reconcile goes on without it
            log.warning("posting Event %s about %s %s: %s", event.reason, involved.get("kind"),
                        involved.get("metadata", {}).get("name"), exc)


async def cluster_objects(kube: Kube, kind: str, namespace: str, cluster: str,
                          label_selector: str | None = None) -> list[dict[str, Any]]:
    """A cluster's Leases or KafkaTopics: labelled flotilla.io/cluster=<cluster> (the API server
    filters; app.kubernetes.io/instance is no longer read, builders/topic_labels.py)."""
    return await kube.list(kind, namespace, label_selector=cluster_selector(cluster, label_selector))


async def cluster_admin(memo: kopf.Memo, namespace: str, cluster: str, *,
                        require_ready: bool) -> tuple[str | None, kafka_admin.AdminAuth, str]:
    """The cluster's own bootstrap address (admin_address.py) and how to authenticate there
    (clients/credentials.py: SCRAM as the operator's user when the bootstrap listener is SASL),
    or None and why not."""
    kc = await memo["kube"].get(KAFKA_CLUSTER.kind, namespace, cluster)
    bootstrap, why = admin_address(kc, cluster, require_ready=require_ready)
    if bootstrap is None:
        return None, kafka_admin.PLAINTEXT, why
    try:
        return bootstrap, await ensure_admin_auth(memo["kube"], kc), ""
    except CredentialsError as exc:
        return None, kafka_admin.PLAINTEXT, str(exc)


async def while_unreachable(act: Callable[[], Awaitable[T]], attempts: int = REMOVAL_ATTEMPTS) -> T:
    """`act`, tried again every RETRY_DELAY / 2 while the cluster cannot be reached (the cluster
    may be briefly unreachable), at most `attempts` times; then its last AdminError is raised."""
    for attempt in range(attempts):
        try:
            return await act()
        except kafka_admin.AdminError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(RETRY_DELAY / 2)
    raise AssertionError("attempts must be at least 1")
