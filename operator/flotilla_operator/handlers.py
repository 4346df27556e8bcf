"""The kopf registrations, and nothing else: each handler filters its event and calls a reconciler
(reconcilers/), so what the operator does can be read and tested without kopf.

- KafkaCluster create/update/resume, a StatefulSet DELETED event or a moving roll, a load
  balancer's new address, a KafkaTopic change while a scale-down or roll waits ->
  reconcilers/kafka_cluster.py `reconcile` (the chain of steps);
- other StatefulSet events and Lease holder changes -> `refresh_status`;
- ClientQuota -> reconcilers/client_quota.py; KafkaUser -> reconcilers/kafka_user.py;
  RecordDeletion -> reconcilers/record_deletion.py (a schedule per resource);
- start-up: kopf's settings, the shared memo, the metrics endpoint and the three loops
  (reconcilers/loops.py: the KafkaCluster resync, the quota and user resync, the rebalance).

No handler puts a finalizer on anything (no on.delete, timer or daemon): a deletion is acted on
when its event is seen, so nothing holds a namespace deletion while the operator is away. Every
kind honours the pause annotation (annotations.py) and gets Events (events.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

import kopf

from . import GROUP, VERSION
from . import metrics
from .api.client_quota import CLIENT_QUOTA
from .api.kafka_cluster import KAFKA_CLUSTER
from .api.kafka_user import KAFKA_USER
from .api.record_deletion import RECORD_DELETION
from .builders.common import MANAGED_BY, cluster_of
from .builders.services import EXTERNAL_LABEL
from .clients import kafka_admin
from .clients.kube import ApiError, Kube, kubeconfig_user_needs_client, load_api_client
from .reconcilers import loops
from .reconcilers.client_quota import reconcile_client_quota, remove_client_quota
from .reconcilers.common import LEASE_ROLE_LABEL
from .reconcilers.kafka_cluster import (lease_holder_changed, new_load_balancer_address, partition_moves, reconcile,
                                        refresh_status, waits_for_topics)
from .reconcilers.kafka_user import reconcile_kafka_user, remove_kafka_user
from .reconcilers.record_deletion import record_deletion_seen
from .reconcilers.startup import check_kube_version, migrate_topic_labels, topic_without_cluster
from .schedules import Schedules
from .settings import Settings

# ------------------------------------------------------------------------------------------
# Start and stop


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod: the service account. Outside: the kubeconfig named by $KUBECONFIG at this moment
    (kopf's reader supports certificates and tokens; exec plugins go through the kubernetes client)."""
    creds = kopf.login_with_service_account(**kwargs)
    if creds is not None:
        return creds
    if kubeconfig_user_needs_client(os.environ.get("KUBECONFIG")):
        return kopf.login_via_client(**kwargs)
    return kopf.login_with_kubeconfig(**kwargs)


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    op: Settings = memo.get("settings") or Settings.from_env()
    memo["settings"] = op
    # Keep kopf's bookkeeping in annotations under our own prefix, and out of .status, whose
    # schema is ours.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kopf.flotilla.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="kopf.flotilla.io", key="last-handled-configuration"
    )
    settings.peering.standalone = True
    settings.posting.level = logging.WARNING
    # Only the brokers' Leases, filtered by the API server: nodes' heartbeat Leases
    # (kube-node-lease) and controllers' election Leases never reach the operator.
    settings.watching.label_selectors["coordination.k8s.io", "leases"] = LEASE_ROLE_LABEL
    # The API client logs whole response bodies at DEBUG: too much even for --verbose.
    logging.getLogger("kubernetes_asyncio").setLevel(logging.INFO)
    memo["kube"] = Kube(await load_api_client(), op.field_manager, on_status=metrics.observe_conditions)
    # Logged, never fatal: which Kubernetes Flotilla needs (1.30) and what is off below it; then one
    # release's migration of KafkaTopics that named their cluster by app.kubernetes.io/instance.
    await check_kube_version(memo["kube"])
    await migrate_topic_labels(memo["kube"], op.namespaces)
    memo["locks"] = {}
    memo["rd_schedules"] = Schedules(RECORD_DELETION.kind)
    # kopf hands each resource object a shallow copy of this memo: state shared between the
    # handlers of different objects (a KafkaCluster's, its StatefulSet's, its KafkaTopics') must
    # be created here, or each copy would grow its own.
    for key in ("scale_blocked", "roll_waiting", "rolling", "unlabelled_topics"):
        memo[key] = set()
    for key in ("progress", "lease_holders", "rd_failures", "pod_problems"):
        memo[key] = {}
    if op.metrics_port >= 0 and memo.get("metrics_server") is None:  # under --leader-elect: already up
        server = metrics.MetricsServer(op.metrics_host, op.metrics_port)
        memo["metrics_server"] = server
        logger.info(f"metrics: {server.start()}")
    memo["resync_task"] = asyncio.create_task(loops.resync_loop(memo), name="flotilla-resync")
    memo["quota_resync_task"] = asyncio.create_task(loops.quota_resync_loop(memo), name="flotilla-quota-resync")
    memo["rebalance_task"] = asyncio.create_task(loops.rebalance_loop(memo), name="flotilla-rebalance")
    logger.info(
        f"flotilla operator started: namespaces={','.join(op.namespaces) or '(all)'} "
        f"resync={op.resync_seconds}s default broker image={op.broker_image}"
    )


CLEANUP_STEP_S = 10.0  # each step of the stop; a step that takes longer is left behind, logged


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """Stop the loops, the schedules, the metrics endpoint and the API client, each step bounded:
    a stop must end even when a step hangs (a loop inside a call that does not answer)."""
    async def bounded(what: str, step) -> None:
        try:
            await asyncio.wait_for(step, CLEANUP_STEP_S)
        except asyncio.TimeoutError:
            logger.warning(f"stopping: {what} did not end within {CLEANUP_STEP_S:.0f}s; going on")
        except Exception:  # a loop that failed on its own is stopped all the same
            pass

    for key in ("resync_task", "quota_resync_task", "rebalance_task"):
        task = memo.get(key)
        if task is not None:
            task.cancel()
            await bounded(key, asyncio.gather(task, return_exceptions=True))
    schedules = memo.get("rd_schedules")
    if schedules is not None:
        await bounded("the record-deletion schedules", schedules.close(timeout=CLEANUP_STEP_S / 2))
    server = memo.get("metrics_server")
    if server is not None:
        server.stop()
    kube = memo.get("kube")
    if kube is not None:
        await bounded("the Kubernetes client", kube.close())


@kopf.on.probe(id="kafkaclusters")
def probe_clusters(memo: kopf.Memo, **_: Any) -> int:
    """Liveness detail: how many clusters the operator currently serialises access to."""
    return len(memo.get("locks") or {})


# ------------------------------------------------------------------------------------------
# KafkaCluster, and its StatefulSet, external Services, Leases and KafkaTopics


@kopf.on.resume(GROUP, VERSION, KAFKA_CLUSTER.plural)
@kopf.on.create(GROUP, VERSION, KAFKA_CLUSTER.plural)
@kopf.on.update(GROUP, VERSION, KAFKA_CLUSTER.plural)
async def kafkacluster_changed(namespace: str, name: str, memo: kopf.Memo, reason: str, **_: Any) -> None:
    await reconcile(memo, namespace, name, why=str(reason))


@kopf.on.event("apps", "v1", "statefulsets", labels={"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "broker"})
async def statefulset_event(event: dict[str, Any], body: kopf.Body, namespace: str, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """Status follows the roll and the pods' readiness without polling; a deleted StatefulSet is
    re-created, and a moving roll's partition follows the brokers."""
    owner_name = (body.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/instance")
    if not owner_name or "kube" not in memo:
        return
    try:
        if event.get("type") == "DELETED":
            await reconcile(memo, namespace, owner_name, why="statefulset deleted")
        elif partition_moves(dict(body)):
            await reconcile(memo, namespace, owner_name, why="statefulset rolling")
        else:
            await refresh_status(memo, namespace, owner_name, dict(body))
    except (ApiError, kopf.TemporaryError, kopf.PermanentError) as exc:
        logger.warning(f"status of KafkaCluster {namespace}/{owner_name}: {exc}")


@kopf.on.event("", "v1", "services", labels={EXTERNAL_LABEL: kopf.PRESENT})
async def external_service_event(event: dict[str, Any], body: kopf.Body, namespace: str, memo: kopf.Memo,
                                 logger: logging.Logger, **_: Any) -> None:
    """A broker's load balancer got (or changed) its address: hand it to the brokers now rather
    than at the next resync. Other changes of external Services are left to the resync."""
    cluster = cluster_of(body)
    if not cluster or "kube" not in memo or event.get("type") == "DELETED":
        return
    address = new_load_balancer_address(memo, namespace, dict(body))
    if address is None:
        return
    try:
        await reconcile(memo, namespace, cluster,
                        why=f"load balancer {body.get('metadata', {}).get('name', '')} has address {address}")
    except (ApiError, kopf.TemporaryError, kopf.PermanentError) as exc:
        logger.warning(f"KafkaCluster {namespace}/{cluster}: {exc}")


@kopf.on.event("coordination.k8s.io", "v1", "leases", labels={LEASE_ROLE_LABEL: kopf.PRESENT})
async def lease_event(event: dict[str, Any], body: kopf.Body, namespace: str, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """A broker registered or left, or the controller changed: refresh registeredBrokers and
    controller. Renewals alone (the same holder) change nothing and are skipped; a Lease that
    expires without an event is noticed by the periodic resync."""
    cluster = cluster_of(body)
    if not cluster or "kube" not in memo:
        return
    if not lease_holder_changed(memo, namespace, dict(body), deleted=event.get("type") == "DELETED"):
        return
    try:
        await refresh_status(memo, namespace, cluster)
    except (ApiError, kopf.TemporaryError, kopf.PermanentError) as exc:
        logger.warning(f"status of KafkaCluster {namespace}/{cluster}: {exc}")


@kopf.on.event(GROUP, VERSION, "kafkatopics")
async def kafkatopic_event(event: dict[str, Any], body: kopf.Body, namespace: str, memo: kopf.Memo,
                           logger: logging.Logger, **_: Any) -> None:
    """While a cluster's scale-down is blocked, a change of its KafkaTopics (partitions moved off
    the brokers to remove, a topic deleted) re-checks it at once; other clusters' topics, and
    this one's when nothing is blocked, are ignored (ISR changes are frequent). A KafkaTopic
    without flotilla.io/cluster gets a condition saying so (reconcilers/startup.py)."""
    if "kube" not in memo:
        return
    cluster = cluster_of(body)
    if not cluster and event.get("type") != "DELETED":
        await topic_without_cluster(memo["kube"], dict(body), memo.setdefault("unlabelled_topics", set()))
    if not cluster or not waits_for_topics(memo, namespace, cluster):
        return
    try:
        await reconcile(memo, namespace, cluster, why="kafkatopic changed while a scale-down or a roll waits")
    except (ApiError, kopf.TemporaryError, kopf.PermanentError) as exc:
        logger.warning(f"KafkaCluster {namespace}/{cluster}: {exc}")


# ------------------------------------------------------------------------------------------
# ClientQuota and KafkaUser: applied on change and by the quota resync; removed when the deletion
# is seen. No finalizer (a kopf on.delete handler would add one): a finalizer holds the resource,
# and so a namespace deletion, for as long as the operator is not running or the cluster cannot be
# reached. One deleted while the operator is down, or whose removal failed, is removed by the
# orphan pass of the quota resync (reconcilers/orphans.py).


@kopf.on.resume(GROUP, VERSION, CLIENT_QUOTA.plural)
@kopf.on.create(GROUP, VERSION, CLIENT_QUOTA.plural)
@kopf.on.update(GROUP, VERSION, CLIENT_QUOTA.plural)
async def clientquota_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await reconcile_client_quota(memo, body)


@kopf.on.event(GROUP, VERSION, CLIENT_QUOTA.plural)
async def clientquota_deleted(event: dict[str, Any], body: kopf.Body, memo: kopf.Memo, logger: logging.Logger,
                              **_: Any) -> None:
    """Deleting the resource removes its quota from the cluster, once the deletion is seen."""
    if event.get("type") != "DELETED" or "kube" not in memo:
        return
    try:
        await remove_client_quota(memo, body)
    except (ApiError, kafka_admin.AdminError) as exc:
        meta = body["metadata"]
        logger.warning(f"ClientQuota {meta['namespace']}/{meta['name']} deleted; removing its quota failed: {exc}")


@kopf.on.resume(GROUP, VERSION, KAFKA_USER.plural)
@kopf.on.create(GROUP, VERSION, KAFKA_USER.plural)
@kopf.on.update(GROUP, VERSION, KAFKA_USER.plural)
async def kafkauser_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    await reconcile_kafka_user(memo, namespace, name)


@kopf.on.event(GROUP, VERSION, KAFKA_USER.plural)
async def kafkauser_deleted(event: dict[str, Any], body: kopf.Body, memo: kopf.Memo, logger: logging.Logger,
                            **_: Any) -> None:
    """Deleting the resource removes the user's credential, ACLs and quotas from the cluster once
    the deletion is seen; the garbage collector deletes its Secret."""
    if event.get("type") != "DELETED" or "kube" not in memo:
        return
    try:
        await remove_kafka_user(memo, body)
    except (ApiError, kafka_admin.AdminError) as exc:
        meta = body["metadata"]
        logger.warning(f"KafkaUser {meta['namespace']}/{meta['name']} deleted; "
                       f"removing it from the cluster failed: {exc}")


# ------------------------------------------------------------------------------------------
# RecordDeletion


@kopf.on.event(GROUP, VERSION, RECORD_DELETION.plural)
async def recorddeletion_event(event: dict[str, Any], body: kopf.Body, namespace: str, name: str, memo: kopf.Memo,
                               **_: Any) -> None:
    """Start, feed or stop the resource's schedule. An event handler, not a kopf daemon: kopf puts
    a finalizer on every resource with a daemon, and a finalizer holds the resource, and so its
    namespace's deletion, for as long as the operator is away. On deletion nothing needs doing in
    Kafka (a RecordDeletion deletes records when it runs, never when it goes). A finalizer left by
    an older operator version is removed by kopf, which sees no handler needing it."""
    if "kube" not in memo:
        return
    record_deletion_seen(memo, namespace, name, dict(body), deleted=event.get("type") == "DELETED")
