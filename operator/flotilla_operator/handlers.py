"""kopf handlers: thin. They fetch, call the pure builders and status functions, and send.

- KafkaCluster create/update/resume -> `reconcile`: build every child, server-side apply it
  (children carry a controller ownerReference, so deleting the cluster garbage-collects them),
  then write .status from what the StatefulSet reports. The cluster.id comes from a record that
  outlives the KafkaCluster (builders/cluster_id.py); a StatefulSet with another
  podManagementPolicy is deleted orphaning its pods and re-created; the roll's partition opens one
  broker at a time while every broker is Ready and every ISR full (builders/roll.py).
- StatefulSet events (ours, by label) -> `refresh_status`, or `reconcile` while a roll moves the
  partition: status follows the roll and the pods' readiness without polling; a deleted
  StatefulSet is re-created.
- A resync loop (one task for the whole operator, so no per-object finalizer is needed) re-applies
  every KafkaCluster every `resync_seconds`, repairing drift in any child.
- ClientQuota -> `reconcile_client_quota`: AlterClientQuotas through the cluster's own bootstrap
  address (admin_address.py; a small kio admin client), status per broker from DescribeClientQuotas, one operator-wide loop re-applies
  (a kopf timer would put a finalizer on each); deleting the
  resource removes the quota when the deletion is seen (no finalizer: nothing holds a namespace
  deletion); two resources naming one entity: the oldest wins, the others report Conflict.
- KafkaTopic events (while a cluster's scale-down is blocked or its roll waits for an ISR) ->
  `reconcile`: a StatefulSet is never shrunk below a broker that still holds partition replicas
  (builders/scale_down.py); the cluster reports ScaleDownBlocked until they have moved.
- KafkaUser -> `reconcile_kafka_user` (one run at a time per user, on the latest object): the
  user's Secret (password generated once), AlterUserScramCredentials, ACLs diffed against
  DescribeAcls, quotas of the user entity (builders/kafka_user.py decides); re-applied with the
  ClientQuotas every QUOTA_RESYNC_S; the DELETED event removes credential, ACLs and quotas (no
  finalizer). On a cluster whose bootstrap listener is SASL every admin client authenticates as the
  operator's own user (operator_credentials.py).
- RecordDeletion -> an asyncio task per resource (schedules.py, started and stopped by watch
  events; a kopf daemon would put a finalizer on each): once per generation or every
  spec.interval it resolves the policy (builders/record_deletion.py) and calls DeleteRecords
  through confluent-kafka's AdminClient (record_admin.py); failures back off; deleting the
  resource stops the task and deletes nothing.

One asyncio.Lock per KafkaCluster serialises all of these, and each run reads the latest object
first, so a slow run can never apply an older spec over a newer one.

Every kind honours the pause annotation (annotations.py: nothing is changed, the status says
ReconciliationPaused) and gets Events for what the operator did (events.py decides, from the
status before and after a run; `_emit` posts them).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Awaitable, Callable

import kopf

from . import GROUP, VERSION
from . import metrics
from .clients import kafka_admin
from .clients import record_admin
from . import rebalancer
from .builders import rebalance as rb
from .builders import rebalance_target
from . import events as ev
from .admin_address import admin_address
from .builders import certificates as certs
from .clients.certificates import (CertificateError, CertificatesPending, clients_ca, ensure_cluster_certificates,
                                   user_certificate_from_cert_manager)
from .clients.credentials import CredentialsError, ensure_admin_auth, ensure_broker_credentials
from .annotations import acknowledge_patch, live_restart_token, paused, restart_token
from .clients.kube import ApiError, Kube, load_api_client
from .builders import client_quota as cq
from .builders import kafka_user as ku
from .builders import record_deletion as rd
from .builders import Desired, build_all
from .builders import cluster_id as cid
from .builders.common import MANAGED_BY, OPERATOR_USER, Owner, cluster_of, foreign, selector_string, statefulset_name
from .builders.roll import TEMPLATE_HASH_ANNOTATION, RollDecision, roll_partition, roll_state
from .builders.external_addresses import (broker_addresses, certificate_addresses, ingress_address,
                                         load_balancer_listeners, pending_brokers)
from .builders.services import EXTERNAL_LABEL, stale_external_services
from .builders.statefulset import POD_MANAGEMENT_POLICY
from .builders.scale_down import ScaleDecision, scale_decision
from .api.client_quota import CLIENT_QUOTA
from .api.common import parse_spec
from .api.kafka_cluster import KAFKA_CLUSTER, Certificates, KafkaClusterSpec
from .api.kafka_user import KAFKA_USER
from .api.record_deletion import RECORD_DELETION, RecordDeletionSpec
from .preflight import check_server_properties
from .schedules import Schedule, Schedules
from .settings import Settings
from .status import (condition, is_paused, kafka_cluster_status, paused_status, resumed_status, same_status,
                     stalled_condition, with_rebalance)

LEASE_ROLE_LABEL = "flotilla.io/lease"  # on the brokers' Leases: broker or controller


async def _cluster_objects(kube: Kube, kind: str, namespace: str, cluster: str,
                           label_selector: str | None = None) -> list[dict[str, Any]]:
    """A cluster's Leases or KafkaTopics: named by flotilla.io/cluster or, written before it, by
    app.kubernetes.io/instance; a selector cannot say "either", so the namespace's are filtered."""
    return [o for o in await kube.list(kind, namespace, label_selector=label_selector) if cluster_of(o) == cluster]

log = logging.getLogger("flotilla_operator")

RETRY_DELAY = 10.0
QUOTA_RESYNC_S = 10.0  # every ClientQuota re-applied and re-read (see _quota_resync_loop)
QUOTA_REMOVAL_ATTEMPTS = 6  # a deleted ClientQuota's quota: tried for about half a minute
EVENT_COMPONENT = "flotilla-operator"


async def _emit(kube: Kube, involved: dict[str, Any], events: list[ev.Event]) -> None:
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


# ------------------------------------------------------------------------------------------
# Start and stop


def _kubeconfig_user_needs_client(path: str | None) -> bool:
    """True when the current kubeconfig user authenticates with an exec plugin or auth provider,
    which only the kubernetes client library knows how to run."""
    import os

    import yaml

    paths = [p for p in (path or os.path.expanduser("~/.kube/config")).split(os.pathsep) if p]
    docs = []
    for p in paths:
        try:
            with open(p) as fh:
                docs.append(yaml.safe_load(fh) or {})
        except OSError:
            continue
    current = next((d.get("current-context") for d in docs if d.get("current-context")), None)
    contexts = {c.get("name"): c.get("context") or {} for d in docs for c in d.get("contexts") or []}
    users = {u.get("name"): u.get("user") or {} for d in docs for u in d.get("users") or []}
    user = users.get(contexts.get(current, {}).get("user"), {})
    return bool(user.get("exec") or user.get("auth-provider"))


@kopf.on.login()
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    """In a pod: the service account. Outside: the kubeconfig named by $KUBECONFIG at this moment
    (kopf's reader supports certificates and tokens; exec plugins go through the kubernetes client)."""
    import os

    creds = kopf.login_with_service_account(**kwargs)
    if creds is not None:
        return creds
    if _kubeconfig_user_needs_client(os.environ.get("KUBECONFIG")):
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
    memo["kube"] = Kube(await load_api_client(), op.field_manager)
    memo["locks"] = {}
    memo["rd_schedules"] = Schedules(RECORD_DELETION.kind)
    # kopf hands each resource object a shallow copy of this memo: state shared between the
    # handlers of different objects (a KafkaCluster's, its StatefulSet's, its KafkaTopics') must
    # be created here, or each copy would grow its own.
    for key in ("scale_blocked", "roll_waiting", "rolling"):
        memo[key] = set()
    for key in ("progress", "lease_holders", "rd_failures"):
        memo[key] = {}
    if op.metrics_port >= 0:
        server = metrics.MetricsServer(op.metrics_host, op.metrics_port)
        memo["metrics_server"] = server
        logger.info(f"metrics: {server.start()}")
    memo["resync_task"] = asyncio.create_task(_resync_loop(memo), name="flotilla-resync")
    memo["quota_resync_task"] = asyncio.create_task(_quota_resync_loop(memo), name="flotilla-quota-resync")
    memo["rebalance_task"] = asyncio.create_task(_rebalance_loop(memo), name="flotilla-rebalance")
    logger.info(
        f"flotilla operator started: namespaces={','.join(op.namespaces) or '(all)'} "
        f"resync={op.resync_seconds}s default broker image={op.broker_image}"
    )


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    for key in ("resync_task", "quota_resync_task", "rebalance_task"):
        task = memo.get(key)
        if task is not None:
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
    schedules = memo.get("rd_schedules")
    if schedules is not None:
        await schedules.close(timeout=10.0)
    server = memo.get("metrics_server")
    if server is not None:
        server.stop()
    kube = memo.get("kube")
    if kube is not None:
        await kube.close()


@kopf.on.probe(id="kafkaclusters")
def probe_clusters(memo: kopf.Memo, **_: Any) -> int:
    """Liveness detail: how many clusters the operator currently serialises access to."""
    return len(memo.get("locks") or {})


# ------------------------------------------------------------------------------------------
# KafkaCluster


async def _leases(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]] | None:
    """The cluster's broker and controller Leases (for registeredBrokers/controller); None if
    they cannot be read, so a status is still written."""
    try:
        return await _cluster_objects(kube, "Lease", namespace, name, label_selector=LEASE_ROLE_LABEL)
    except ApiError as err:
        log.warning("reading the Leases of %s/%s: %s", namespace, name, err.reason)
        return None


async def _scale(kube: Kube, memo: kopf.Memo, owner: Owner, spec: KafkaClusterSpec,
                 statefulset: dict[str, Any] | None) -> ScaleDecision:
    """How many brokers the StatefulSet may have: spec.replicas, unless that removes brokers that
    still hold partition replicas (their KafkaTopics are read only when shrinking). Remembers the
    blocked clusters, so that a KafkaTopic change re-checks them at once."""
    current = ((statefulset or {}).get("spec") or {}).get("replicas")
    topics: list[dict[str, Any]] = []
    if current is not None and spec.replicas < int(current):
        topics = await _cluster_objects(kube, "KafkaTopic", owner.namespace, owner.name)
    decision = scale_decision(None if current is None else int(current), spec.replicas, topics)
    blocked: set[tuple[str, str]] = memo.setdefault("scale_blocked", set())
    if decision.blocked:
        if (owner.namespace, owner.name) not in blocked:
            log.warning("KafkaCluster %s/%s: %s", owner.namespace, owner.name, decision.message())
        blocked.add((owner.namespace, owner.name))
    else:
        blocked.discard((owner.namespace, owner.name))
    return decision


async def _cluster_id(kube: Kube, owner: Owner, spec: KafkaClusterSpec, previous: dict[str, Any]) -> cid.ClusterIdChoice:
    """The fleet's cluster.id: spec, the record that outlives the KafkaCluster, status, or new."""
    record = await kube.get("ConfigMap", owner.namespace, cid.record_name(owner))
    return cid.choose_cluster_id(owner, spec_id=spec.cluster_id, record=record, status_id=previous.get("clusterId"))


async def _roll(kube: Kube, memo: kopf.Memo, owner: Owner, statefulset: dict[str, Any] | None,
                draft: Desired, replicas: int) -> RollDecision:
    """The StatefulSet's partition: open for the next broker only while the fleet is whole
    (builders/roll.py). KafkaTopics are read only when a broker waits to be rolled; a cluster
    held for its ISRs is remembered, so that a KafkaTopic change re-checks it at once."""
    pods = await kube.list("Pod", owner.namespace, label_selector=selector_string(owner))
    state = roll_state(statefulset, pods, desired_template_hash=draft.template_hash, desired_replicas=replicas)
    topics: list[dict[str, Any]] = []
    if state.next_broker is not None:
        topics = await _cluster_objects(kube, "KafkaTopic", owner.namespace, owner.name)
    decision = roll_partition(state, pods, topics)
    waiting: set[tuple[str, str]] = memo.setdefault("roll_waiting", set())
    if decision.blocked:
        waiting.add((owner.namespace, owner.name))
    else:
        waiting.discard((owner.namespace, owner.name))
    return decision


async def _replace_statefulset(kube: Kube, current: dict[str, Any]) -> None:
    """podManagementPolicy is immutable: a StatefulSet made with another one (OrderedReady, before
    this operator version) is deleted with orphan propagation, so its pods keep running on their
    claims; the DELETED event re-creates it at once and the new one adopts them."""
    meta = current["metadata"]
    if meta.get("deletionTimestamp"):
        return
    log.warning("StatefulSet %s/%s: replacing it to change podManagementPolicy %s -> %s (pods and claims kept)",
                meta["namespace"], meta["name"], (current.get("spec") or {}).get("podManagementPolicy"),
                POD_MANAGEMENT_POLICY)
    await kube.delete("StatefulSet", meta["namespace"], meta["name"], propagation="Orphan", uid=meta.get("uid"))


async def _foreign_child(kube: Kube, owner: Owner, desired: Desired, statefulset: dict[str, Any] | None) -> str | None:
    """Why one of the children's names is held by an object the fleet did not create (None when
    each is absent or ours): such an object is never applied over (builders/common.py `foreign`)."""
    for obj in desired.objects:
        if obj["kind"] == "StatefulSet":
            existing = statefulset
        else:
            existing = await kube.get(obj["kind"], owner.namespace, obj["metadata"]["name"])
        if existing is not None:
            existing = {"kind": obj["kind"], **existing}
        why = foreign(existing, owner)
        if why:
            return why
    return None


async def _remove_stale_external_services(kube: Kube, owner: Owner, desired: Desired) -> None:
    """Delete this cluster's NodePort Services that the spec no longer asks for (a removed broker's,
    or a listener no longer external): applying never removes anything."""
    existing = await _cluster_objects(kube, "Service", owner.namespace, owner.name, label_selector=EXTERNAL_LABEL)
    for name in stale_external_services(existing, [o for o in desired.objects if o["kind"] == "Service"]):
        await kube.delete("Service", owner.namespace, name)


async def _load_balancer_addresses(kube: Kube, owner: Owner, spec: KafkaClusterSpec, replicas: int) -> dict[str, str]:
    """The addresses the cloud has given the brokers' load balancers so far (external_addresses.py);
    the rest are logged as pending (their brokers wait for them before they start)."""
    if not load_balancer_listeners(spec):
        return {}
    services = await _cluster_objects(kube, "Service", owner.namespace, owner.name, label_selector=EXTERNAL_LABEL)
    addresses = broker_addresses(owner, spec, replicas, services)
    pending = pending_brokers(spec, replicas, addresses)
    if pending:
        log.info("%s/%s: waiting for load balancer addresses of %s", owner.namespace, owner.name, ", ".join(pending))
    return addresses


def _needs_replacing(current: dict[str, Any] | None) -> bool:
    if current is None:
        return False
    if current["metadata"].get("deletionTimestamp"):
        return True
    return (current.get("spec") or {}).get("podManagementPolicy", "OrderedReady") != POD_MANAGEMENT_POLICY


def _lock(memo: kopf.Memo, namespace: str, name: str) -> asyncio.Lock:
    locks: dict[tuple[str, str], asyncio.Lock] = memo["locks"]
    return locks.setdefault((namespace, name), asyncio.Lock())


async def reconcile(memo: kopf.Memo, namespace: str, name: str, *, why: str) -> dict[str, Any] | None:
    """Apply every child of one KafkaCluster and write its status. Returns the status written."""
    kube: Kube = memo["kube"]
    op: Settings = memo["settings"]
    async with _lock(memo, namespace, name):
        with metrics.observe(KAFKA_CLUSTER.kind):
            body = await kube.get(KAFKA_CLUSTER.kind, namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                metrics.forget_cluster(namespace, name)
                return None
            owner = Owner.from_body(body)
            previous = body.get("status") or {}
            if paused(body["metadata"]):
                status = paused_status(previous, generation=owner.generation)
                if not same_status(previous, status):
                    await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, status)
                await _emit(kube, body, _cluster_events(memo, namespace, name, previous, status))
                return status
            try:
                spec = parse_spec(KAFKA_CLUSTER, body.get("spec") or {})
            except ValueError as exc:
                status = kafka_cluster_status(
                    owner, replicas=0, port=9092, config_hash=None, statefulset=None,
                    previous=previous, error=str(exc), error_reason="InvalidSpec",
                )
                await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, status)
                await _emit(kube, body, _cluster_events(memo, namespace, name, previous, status))
                raise kopf.PermanentError(f"invalid spec: {exc}") from exc
            assert isinstance(spec, KafkaClusterSpec)
            current = await kube.get("StatefulSet", namespace, statefulset_name(owner))
            identity = await _cluster_id(kube, owner, spec, previous)

            async def stopped(message: str, reason: str, statefulset: dict[str, Any] | None,
                              digest: str | None = None) -> None:
                """The status and Events of a run that stops at `message` (what it did not apply)."""
                status = kafka_cluster_status(
                    owner, replicas=spec.replicas, port=spec.listeners[0].port, config_hash=digest,
                    statefulset=statefulset, previous=previous, error=message, error_reason=reason,
                    cluster_id=identity.cluster_id,
                )
                await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, status)
                await _emit(kube, body, _cluster_events(memo, namespace, name, previous, status))

            if identity.error:
                # Apply nothing: the brokers keep running with the id their volumes hold.
                await stopped(identity.error, "InvalidSpec", current)
                raise kopf.PermanentError(identity.error)
            scale = await _scale(kube, memo, owner, spec, current)
            token, restart_requested = restart_token(body["metadata"], current, datetime.now(timezone.utc))
            replicas = max(spec.replicas, scale.replicas or 0)
            addresses = await _load_balancer_addresses(kube, owner, spec, replicas)
            try:
                # Before the StatefulSet: a broker never starts without its certificate.
                certificates = await ensure_cluster_certificates(
                    kube, owner, spec, replicas=replicas,
                    external_addresses=certificate_addresses(spec, replicas, addresses))
            except CertificateError as exc:
                await stopped(f"certificates: {exc}",
                              "CertificatesPending" if isinstance(exc, CertificatesPending) else "ApplyFailed", current)
                raise kopf.TemporaryError(f"certificates: {exc}", delay=RETRY_DELAY) from exc
            await _emit(kube, body, [ev.Event(ev.NORMAL, ev.CERTIFICATES_ISSUED, line) for line in certificates.issued])
            build = dict(image=op.broker_image, pull_policy=op.image_pull_policy,
                         statefulset_replicas=scale.replicas, cluster_id=identity.cluster_id,
                         restart_token=token, certificate_generation=certificates.generation,
                         external_addresses=addresses)
            draft = build_all(owner, spec, **build)
            problem = check_server_properties(draft.server_properties)
            if problem:
                # Apply nothing: the running brokers keep their configuration.
                message = f"spec.config: the broker would refuse it: {problem}"
                await stopped(message, "InvalidConfig", current)
                raise kopf.PermanentError(message)
            if identity.needs_record and await kube.create(cid.build_record(owner, identity.cluster_id)) is None:
                raise kopf.TemporaryError("the cluster id record appeared meanwhile: choosing again", delay=1)
            replacing = _needs_replacing(current)
            if replacing:
                if not current["metadata"].get("deletionTimestamp"):
                    await _emit(kube, body, [ev.Event(ev.NORMAL, ev.STATEFULSET_REPLACED, (
                        f"re-creating StatefulSet {current['metadata']['name']} with podManagementPolicy "
                        f"{POD_MANAGEMENT_POLICY}; its pods and claims are kept"))])
                await _replace_statefulset(kube, current)
                current = None
            live_partition = _live_partition(current)
            was_waiting = (namespace, name) in memo.get("roll_waiting", ())
            started = ev.roll_started(((current or {}).get("metadata", {}).get("annotations") or {}).get(
                TEMPLATE_HASH_ANNOTATION) if current else None, draft.template_hash,
                int(((current or {}).get("spec") or {}).get("replicas") or 0))
            roll = await _roll(kube, memo, owner, current, draft, scale.replicas)
            desired = build_all(owner, spec, **build, partition=roll.partition)
            conflict = await _foreign_child(kube, owner, desired, current)
            if conflict:
                # Apply nothing: applying would make the KafkaCluster the owner of someone else's object.
                await stopped(conflict, "Conflict", current)
                raise kopf.PermanentError(conflict)
            try:
                await ensure_broker_credentials(kube, body)  # before pods that read them start
            except CredentialsError as exc:
                raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc
            sts = None
            try:
                for obj in desired.objects:
                    if obj["kind"] == "StatefulSet":
                        if replacing:
                            continue  # re-created once the old one is gone (its DELETED event)
                        sts = await kube.apply(obj)
                    else:
                        await kube.apply(obj)
                obj = {"kind": "Service", "metadata": {"name": "(external, removed)"}}
                await _remove_stale_external_services(kube, owner, desired)
            except ApiError as err:
                message = f"applying {obj['kind']} {obj['metadata']['name']}: {err.reason}"
                current = await kube.get("StatefulSet", namespace, desired.statefulset["metadata"]["name"])
                await stopped(message, "ApplyFailed", current, desired.config_hash)
                raise kopf.TemporaryError(message, delay=RETRY_DELAY) from err
            if restart_requested and sts is not None:
                # The new token is on the pod template: the roll gate restarts the brokers from here.
                await kube.patch(KAFKA_CLUSTER.kind, namespace, name, acknowledge_patch())
                await _emit(kube, body, [ev.Event(ev.NORMAL, ev.ROLLING_RESTART_REQUESTED, (
                    f"restarting every broker one at a time (pod template {token}); annotation removed"))])
            status = kafka_cluster_status(
                owner, replicas=spec.replicas, port=spec.listeners[0].port,
                config_hash=desired.config_hash, statefulset=sts, previous=previous,
                leases=await _leases(kube, namespace, name), scale=scale,
                cluster_id=identity.cluster_id, roll=roll,
            )
            if not same_status(previous, status):
                await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, status)
            if sts is not None:
                await _emit(kube, body, started + ev.roll_events(name, live_partition, roll.partition, roll.restarting,
                                                                 roll.waiting, was_waiting))
            await _emit(kube, body, _cluster_events(memo, namespace, name, previous, status))
            if sts is not None and started:
                # Remembered after this run's status: the roll it starts cannot have finished yet.
                memo.setdefault("rolling", set()).add((namespace, name))
            metrics.observe_cluster(namespace, name, spec.replicas, status, previous.get("rebalance"))
            log.debug("reconciled %s/%s (%s): %s", namespace, name, why, status["conditions"][0]["reason"])
            return status


async def refresh_status(memo: kopf.Memo, namespace: str, name: str, statefulset: dict[str, Any] | None = None) -> None:
    """Recompute a KafkaCluster's status from an event of its StatefulSet or of its Leases."""
    kube: Kube = memo["kube"]
    op: Settings = memo["settings"]
    async with _lock(memo, namespace, name):
        body = await kube.get(KAFKA_CLUSTER.kind, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            metrics.forget_cluster(namespace, name)
            return
        try:
            spec = parse_spec(KAFKA_CLUSTER, body.get("spec") or {})
        except ValueError:
            return  # reconcile() reports it
        assert isinstance(spec, KafkaClusterSpec)
        owner = Owner.from_body(body)
        previous = body.get("status") or {}
        # An older generation's status stays until reconcile() has applied the new spec.
        if previous.get("observedGeneration") != owner.generation or paused(body["metadata"]):
            return
        identity = await _cluster_id(kube, owner, spec, previous)
        if identity.error:
            return  # reconcile() reports it
        if statefulset is None:
            statefulset = await kube.get("StatefulSet", namespace, statefulset_name(owner))
        scale = await _scale(kube, memo, owner, spec, statefulset)
        desired = build_all(owner, spec, image=op.broker_image, pull_policy=op.image_pull_policy,
                            statefulset_replicas=scale.replicas, cluster_id=identity.cluster_id,
                            restart_token=live_restart_token(statefulset),
                            certificate_generation=certs.live_generation(statefulset))
        roll = await _roll(kube, memo, owner, statefulset, desired, scale.replicas)
        status = kafka_cluster_status(
            owner, replicas=spec.replicas, port=spec.listeners[0].port,
            config_hash=desired.config_hash, statefulset=statefulset, previous=previous,
            leases=await _leases(kube, namespace, name), scale=scale,
            cluster_id=identity.cluster_id, roll=roll,
        )
        if not same_status(previous, status):
            await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, status)
        await _emit(kube, body, _cluster_events(memo, namespace, name, previous, status))
        metrics.observe_cluster(namespace, name, spec.replicas, status, previous.get("rebalance"))


def _cluster_events(memo: kopf.Memo, namespace: str, name: str, previous: dict[str, Any],
                    status: dict[str, Any]) -> list[ev.Event]:
    """events.cluster_events with the cluster's last progress remembered across runs (so a roll's
    passes through ApplyingChanges neither end nor restart it); an operator restart starts from
    the stored status."""
    progress: dict[tuple[str, str], Any] = memo.setdefault("progress", {})
    found = ev.cluster_events(previous, status, progress.get((namespace, name), ev.FROM_STATUS))
    now = ev.progress_reason(status)
    if now != ev.TRANSIENT and not is_paused(status):
        progress[(namespace, name)] = now
    rolling: set[tuple[str, str]] = memo.setdefault("rolling", set())
    finished = ev.roll_finished((namespace, name) in rolling, status)
    if finished:
        rolling.discard((namespace, name))
    return finished + found


def _live_partition(statefulset: dict[str, Any] | None) -> int | None:
    if statefulset is None:
        return None
    rolling = ((statefulset.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
    return int(rolling.get("partition") or 0)


def _partition_moves(statefulset: dict[str, Any]) -> bool:
    """A roll is under way or held: the partition must follow the brokers (reconcile applies it)."""
    spec, st = statefulset.get("spec") or {}, statefulset.get("status") or {}
    partition = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition") or 0
    return bool(partition) or st.get("currentRevision") != st.get("updateRevision")


@kopf.on.resume(GROUP, VERSION, KAFKA_CLUSTER.plural)
@kopf.on.create(GROUP, VERSION, KAFKA_CLUSTER.plural)
@kopf.on.update(GROUP, VERSION, KAFKA_CLUSTER.plural)
async def kafkacluster_changed(namespace: str, name: str, memo: kopf.Memo, reason: str, **_: Any) -> None:
    await reconcile(memo, namespace, name, why=str(reason))


@kopf.on.event("apps", "v1", "statefulsets", labels={"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "broker"})
async def statefulset_event(event: dict[str, Any], body: kopf.Body, namespace: str, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    owner_name = (body.get("metadata", {}).get("labels") or {}).get("app.kubernetes.io/instance")
    if not owner_name or "kube" not in memo:
        return
    try:
        if event.get("type") == "DELETED":
            await reconcile(memo, namespace, owner_name, why="statefulset deleted")
        elif _partition_moves(dict(body)):
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
    seen: dict[tuple[str, str], str | None] = memo.setdefault("load_balancer_addresses", {})
    key = (namespace, body.get("metadata", {}).get("name", ""))
    address = ingress_address(dict(body))
    if seen.get(key) == address:
        return
    seen[key] = address
    if address is None:
        return
    try:
        await reconcile(memo, namespace, cluster, why=f"load balancer {key[1]} has address {address}")
    except (ApiError, kopf.TemporaryError, kopf.PermanentError) as exc:
        logger.warning(f"KafkaCluster {namespace}/{cluster}: {exc}")


@kopf.on.event("coordination.k8s.io", "v1", "leases", labels={LEASE_ROLE_LABEL: kopf.PRESENT})
async def lease_event(event: dict[str, Any], body: kopf.Body, namespace: str, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """A broker registered or left, or the controller changed: refresh registeredBrokers and
    controller. Renewals alone (the same holder) change nothing and are skipped; a Lease that
    expires without an event is noticed by the periodic resync."""
    meta = body.get("metadata", {})
    cluster = cluster_of(body)
    if not cluster or "kube" not in memo:
        return
    holders: dict[tuple[str, str], Any] = memo.setdefault("lease_holders", {})
    key = (namespace, meta.get("name", ""))
    holder = None if event.get("type") == "DELETED" else (body.get("spec") or {}).get("holderIdentity")
    if key in holders and holders[key] == holder:
        return
    holders[key] = holder
    try:
        await refresh_status(memo, namespace, cluster)
    except (ApiError, kopf.TemporaryError, kopf.PermanentError) as exc:
        logger.warning(f"status of KafkaCluster {namespace}/{cluster}: {exc}")


@kopf.on.event(GROUP, VERSION, "kafkatopics")
async def kafkatopic_event(body: kopf.Body, namespace: str, memo: kopf.Memo, logger: logging.Logger, **_: Any) -> None:
    """While a cluster's scale-down is blocked, a change of its KafkaTopics (partitions moved off
    the brokers to remove, a topic deleted) re-checks it at once; other clusters' topics, and
    this one's when nothing is blocked, are ignored (ISR changes are frequent)."""
    cluster = cluster_of(body)
    if not cluster or "kube" not in memo:
        return
    key = (namespace, cluster)
    if key not in memo.get("scale_blocked", ()) and key not in memo.get("roll_waiting", ()):
        return
    try:
        await reconcile(memo, namespace, cluster, why="kafkatopic changed while a scale-down or a roll waits")
    except (ApiError, kopf.TemporaryError, kopf.PermanentError) as exc:
        logger.warning(f"KafkaCluster {namespace}/{cluster}: {exc}")


async def _for_each(memo: kopf.Memo, kind: str, what: str, act: Callable[[dict[str, Any]], Awaitable[None]],
                    *, skip_deleting: bool = False) -> None:
    """`act` on every object of `kind` in the watched namespaces: the body of the operator's
    periodic loops (one task each for the whole operator, not a kopf timer per resource: kopf puts
    a finalizer on every resource that has a timer, and a finalizer holds a namespace deletion for
    as long as the operator is away). A failure is logged and the loop goes on to the next object,
    and through API hiccups."""
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


async def _resync_loop(memo: kopf.Memo) -> None:
    """Re-apply every KafkaCluster periodically: repairs edited or deleted children."""
    op: Settings = memo["settings"]
    while True:
        await asyncio.sleep(op.resync_seconds)
        await _for_each(memo, KAFKA_CLUSTER.kind, "resync", lambda c: reconcile(
            memo, c["metadata"]["namespace"], c["metadata"]["name"], why="resync"))


# ------------------------------------------------------------------------------------------
# Rebalance: replicas moved by the operator (builders/rebalance.py decides, rebalancer.py acts)

REBALANCE_POLL_S = 2.0  # how often a cluster that may have something to move is looked at
REBALANCE_RETRY_S = 10.0  # after its Kafka could not be reached


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
    bootstrap, auth, why = await _admin_address(memo, namespace, name, require_ready=False)
    cluster = None
    if bootstrap:
        try:
            cluster = await rebalancer.observe(bootstrap, auth)
        except kafka_admin.AdminError as exc:
            why = str(exc)
    async with _lock(memo, namespace, name):
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
            step = rb.decide(inp, rebalancer.view_of(cluster), datetime.now(timezone.utc))
            assert bootstrap is not None
            new = await rebalancer.keep_then_carry_out(kube, Owner.from_body(body), bootstrap, cluster, step,
                                                      dict(inp.previous))
        previous = dict(inp.previous)
        if new is None or new == previous:
            return
        if new.get("phase") != previous.get("phase") or new.get("message") != previous.get("message"):
            log.info("KafkaCluster %s/%s: rebalance %s: %s", namespace, name, new.get("phase"), new.get("message"))
        await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, with_rebalance(
            body.get("status"), new, generation=int(body["metadata"].get("generation") or 1)))
        await _emit(kube, body, ev.rebalance_events(previous, new))
        metrics.observe_rebalance(namespace, name, new)
    if new.get("phase") != previous.get("phase") or key in memo.get("scale_blocked", ()):
        # The Ready/Reconciling/ScaleDownBlocked conditions follow the rebalance (Draining or blocked).
        await refresh_status(memo, namespace, name)


async def _rebalance_loop(memo: kopf.Memo) -> None:
    """Every REBALANCE_POLL_S, a rebalance step for each KafkaCluster (most return at once: nothing
    to move)."""
    while True:
        await asyncio.sleep(REBALANCE_POLL_S)
        await _for_each(memo, KAFKA_CLUSTER.kind, "rebalance", lambda c: rebalance_step(
            memo, c["metadata"]["namespace"], c["metadata"]["name"]))


# ------------------------------------------------------------------------------------------
# ClientQuota (KIP-13): applied through AlterClientQuotas, removed when its deletion is seen


async def _admin_address(memo: kopf.Memo, namespace: str, cluster: str, *,
                         require_ready: bool) -> tuple[str | None, kafka_admin.AdminAuth, str]:
    """The cluster's own bootstrap address (admin_address.py) and how to authenticate there
    (operator_credentials.py: SCRAM as the operator's user when the bootstrap listener is SASL),
    or None and why not."""
    kc = await memo["kube"].get(KAFKA_CLUSTER.kind, namespace, cluster)
    bootstrap, why = admin_address(kc, cluster, require_ready=require_ready)
    if bootstrap is None:
        return None, kafka_admin.PLAINTEXT, why
    try:
        return bootstrap, await ensure_admin_auth(memo["kube"], kc), ""
    except CredentialsError as exc:
        return None, kafka_admin.PLAINTEXT, str(exc)


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
    await _emit(memo["kube"], dict(body), ev.quota_events(previous, status))


async def _quota_owner(kube: Kube, kind: str, body: dict[str, Any]) -> tuple[str, str]:
    """(kind, name) of the resource owning the quotas `body` sets: ClientQuotas and KafkaUsers with
    quotas of its namespace compete for an entity (builders/client_quota.owner_of)."""
    ns = body["metadata"]["namespace"]
    return cq.owner_of(body, await kube.list(CLIENT_QUOTA.kind, ns), await kube.list(KAFKA_USER.kind, ns), kind=kind)


async def reconcile_client_quota(memo: kopf.Memo, body: kopf.Body) -> None:
    """Apply the quota if this resource owns its entity, then report what each broker holds."""
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    if paused(meta):
        previous = dict(body.get("status") or {})
        status = paused_status(previous, generation=int(meta.get("generation") or 1))
        if not same_status(previous, status):
            await memo["kube"].patch_status(CLIENT_QUOTA.kind, meta["namespace"], meta["name"], status)
        await _emit(memo["kube"], dict(body), ev.pause_events(previous, status))
        return
    with metrics.observe(CLIENT_QUOTA.kind):
        try:
            parse_spec(CLIENT_QUOTA, spec)
        except ValueError as exc:
            await _quota_status(memo, body, False, "Invalid", str(exc), None)
            return
        owner = await _quota_owner(memo["kube"], CLIENT_QUOTA.kind, dict(body))
        entity, cluster = cq.entity_of(spec), spec["clusterRef"]["name"]
        if owner != (CLIENT_QUOTA.kind, meta["name"]):
            await _quota_status(memo, body, False, "Conflict",
                                f"{owner[0]} {owner[1]} already sets the quota of {entity} in "
                                f"cluster {cluster}; this one is not applied", None)
            return
        bootstrap, auth, why = await _admin_address(memo, meta["namespace"], cluster, require_ready=False)
        if not bootstrap:
            await _quota_status(memo, body, False, "Pending", why, None)
            return
        desired = cq.desired_ops(spec)
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


@kopf.on.resume(GROUP, VERSION, CLIENT_QUOTA.plural)
@kopf.on.create(GROUP, VERSION, CLIENT_QUOTA.plural)
@kopf.on.update(GROUP, VERSION, CLIENT_QUOTA.plural)
async def clientquota_changed(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    await reconcile_client_quota(memo, body)


async def _quota_resync_loop(memo: kopf.Memo) -> None:
    """Every QUOTA_RESYNC_S, re-apply and re-read every ClientQuota (brokers that joined, a
    conflict's owner that went away, status drift) and every KafkaUser (ACLs or a credential
    changed behind the operator's back, a cluster that became reachable)."""
    while True:
        await asyncio.sleep(QUOTA_RESYNC_S)
        await _for_each(memo, CLIENT_QUOTA.kind, "resync", lambda q: reconcile_client_quota(memo, q),
                        skip_deleting=True)
        await _for_each(memo, KAFKA_USER.kind, "resync", lambda u: reconcile_kafka_user(
            memo, u["metadata"]["namespace"], u["metadata"]["name"]), skip_deleting=True)


@kopf.on.event(GROUP, VERSION, CLIENT_QUOTA.plural)
async def clientquota_deleted(event: dict[str, Any], body: kopf.Body, memo: kopf.Memo, logger: logging.Logger,
                              **_: Any) -> None:
    """Deleting the resource removes its quota from the cluster, once the deletion is seen. No
    finalizer (a kopf on.delete handler would add one): a finalizer holds the resource, and so a
    namespace deletion, for as long as the operator is not running or the cluster cannot be
    reached. The price: a ClientQuota deleted while the operator is down leaves its quota in the
    brokers (docs/operator.md says how to remove it). A resource that lost a conflict never applied
    anything, so there is nothing to remove."""
    if event.get("type") != "DELETED" or "kube" not in memo:
        return
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    try:
        parse_spec(CLIENT_QUOTA, spec)
    except ValueError:
        return
    try:
        if await _quota_owner(memo["kube"], CLIENT_QUOTA.kind, dict(body)) != (CLIENT_QUOTA.kind, meta["name"]):
            return
        bootstrap, auth, _ = await _admin_address(memo, meta["namespace"], spec["clusterRef"]["name"],
                                                  require_ready=False)
        if not bootstrap:
            return  # no cluster to hold it
        for attempt in range(QUOTA_REMOVAL_ATTEMPTS):  # the cluster may be briefly unreachable
            try:
                await kafka_admin.alter_client_quota(bootstrap, cq.entity_of(spec), cq.removal_ops(), auth)
                return
            except kafka_admin.AdminError:
                if attempt == QUOTA_REMOVAL_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(RETRY_DELAY / 2)
    except (ApiError, kafka_admin.AdminError) as exc:
        logger.warning(f"ClientQuota {meta['namespace']}/{meta['name']} deleted; removing its quota failed: {exc}")


# ------------------------------------------------------------------------------------------
# KafkaUser: a Secret with the password, the SCRAM credential, ACLs and quotas; removed from the
# cluster when the deletion is seen (no finalizer, as ClientQuota).


async def _user_status(memo: kopf.Memo, body: dict[str, Any], ready: bool, reason: str, message: str,
                       extra: dict[str, Any] | None = None) -> None:
    meta = body["metadata"]
    previous = dict(body.get("status") or {})
    gen = int(meta.get("generation") or 1)
    now = datetime.now(timezone.utc)
    status: dict[str, Any] = {"observedGeneration": gen, "username": meta["name"], "conditions": [
        condition("Ready", ready, reason, message, generation=gen, now=now, previous=previous.get("conditions")),
        stalled_condition(None if ready else reason, message, generation=gen, now=now,
                          previous=previous.get("conditions")),
    ]}
    status.update(extra or {})
    if not same_status(previous, status):
        await memo["kube"].patch_status(KAFKA_USER.kind, meta["namespace"], meta["name"], status)
    await _emit(memo["kube"], body, ev.user_events(previous, status))


async def _user_secret(kube: Kube, body: dict[str, Any]) -> tuple[str | None, bool, str]:
    """(password, new?, "") from the user's Secret, created once with a random password (or
    rewritten from a TLS user's); or (None, False, why) when a Secret of that name is not this
    KafkaUser's."""
    meta = body["metadata"]
    current = await kube.get("Secret", meta["namespace"], ku.secret_name(body))
    why = ku.foreign_secret(current, body)
    if why:
        return None, False, why
    if current is not None and ku.password_of(current):
        return ku.password_of(current), False, ""
    if current is not None:  # the user authenticated with a certificate until now
        return ku.password_of(await kube.replace({**ku.build_secret(body, ku.new_password()),
                                                 "metadata": {**current["metadata"]}})), True, ""
    created = await kube.create(ku.build_secret(body, ku.new_password()))
    if created is None:  # someone created it in between: read it again next time
        return None, False, f"Secret {ku.secret_name(body)} appeared while being created; retrying"
    return ku.password_of(created), True, ""


async def _user_certificate(kube: Kube, body: dict[str, Any]) -> tuple[str | None, str]:
    """(None, what was done) once the user's Secret holds a certificate from the cluster's clients
    CA that is not due for renewal (issued or renewed here); (the Ready reason, why) when it
    cannot: Conflict (a Secret of that name is not this KafkaUser's), Pending (retried)."""
    meta, cluster = body["metadata"], body["spec"]["clusterRef"]["name"]
    settings = _cluster_certificate_settings(await kube.get(KAFKA_CLUSTER.kind, meta["namespace"], cluster))
    if settings.issuer_ref is not None:
        return await user_certificate_from_cert_manager(kube, body, settings, ku.secret_name(body))
    current = await kube.get("Secret", meta["namespace"], ku.secret_name(body))
    why = ku.foreign_secret(current, body)
    if why:
        return "Conflict", why
    authority = await clients_ca(kube, meta["namespace"], cluster)
    if authority is None:
        return "Pending", (f"KafkaCluster {cluster} has no clients CA yet (it issues one for a listener with protocol SSL "
                       "and authentication tls)")
    ca, bundle = authority
    now = datetime.now(timezone.utc)
    held = certs.decoded(current)
    if not certs.user_certificate_due(held, ca, meta["name"], now=now, renew_before_days=settings.renew_before_days):
        if held.get("ca.crt") == bundle:
            return None, ""
        files = {**held, "ca.crt": bundle}  # the cluster CA was renewed: trust the new bundle
        what = "CA bundle updated"
    else:
        files = certs.user_certificate_files(ca, bundle, meta["name"], now=now, days=settings.validity_days)
        what = "certificate renewed" if held.get("user.crt") else "certificate issued"
    secret = ku.build_tls_secret(body, {k: v for k, v in files.items() if k != "username"})
    if current is None:
        if await kube.create(secret) is None:
            return "Pending", f"Secret {ku.secret_name(body)} appeared while being created; retrying"
    else:
        await kube.replace({**secret, "metadata": {**current["metadata"]}})
    return None, what


def _cluster_certificate_settings(kafka_cluster: dict[str, Any] | None) -> Certificates:
    try:
        return Certificates.model_validate(((kafka_cluster or {}).get("spec") or {}).get("certificates") or {})
    except ValueError:
        return Certificates()


async def reconcile_kafka_user(memo: kopf.Memo, namespace: str, name: str) -> None:
    """One run at a time per KafkaUser, on the latest object: the resync's listing can never apply
    an ACL an edit has just removed."""
    locks: dict[tuple, asyncio.Lock] = memo["locks"]
    async with locks.setdefault((KAFKA_USER.kind, namespace, name), asyncio.Lock()):
        body = await memo["kube"].get(KAFKA_USER.kind, namespace, name)
        if body is not None and not body["metadata"].get("deletionTimestamp"):
            await _reconcile_kafka_user(memo, body)


async def _reconcile_kafka_user(memo: kopf.Memo, body: dict[str, Any]) -> None:
    """Secret, SCRAM credential, ACLs (diffed against DescribeAcls) and quotas, then the status."""
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    kube: Kube = memo["kube"]
    if paused(meta):
        previous = dict(body.get("status") or {})
        status = paused_status(previous, generation=int(meta.get("generation") or 1))
        if not same_status(previous, status):
            await kube.patch_status(KAFKA_USER.kind, meta["namespace"], meta["name"], status)
        await _emit(kube, body, ev.pause_events(previous, status))
        return
    with metrics.observe(KAFKA_USER.kind):
        try:
            parse_spec(KAFKA_USER, spec)
            if meta["name"] == OPERATOR_USER:  # the CRD refuses it too
                raise ValueError(f"metadata.name: {OPERATOR_USER} is the operator's own user")
        except ValueError as exc:
            await _user_status(memo, body, False, "Invalid", str(exc))
            return
        user, previous = meta["name"], dict(body.get("status") or {})
        bootstrap, auth, why = await _admin_address(memo, meta["namespace"], spec["clusterRef"]["name"],
                                                    require_ready=False)
        if not bootstrap:
            await _user_status(memo, body, False, "Pending", why)
            return
        tls = ku.authentication(body) == "tls"
        if tls:
            refused, what = await _user_certificate(kube, body)
            if refused:
                await _user_status(memo, body, False, refused, what)
                return
        else:
            password, new, why = await _user_secret(kube, body)
            if password is None:
                await _user_status(memo, body, False, "Conflict", why)
                return
        extra: dict[str, Any] = {"secret": ku.secret_name(body)}
        try:
            held_mechanisms = await kafka_admin.scram_mechanisms(bootstrap, user, auth)
            if tls:
                if ku.MECHANISM_CODE in held_mechanisms:  # a SCRAM user until now: its password goes
                    await kafka_admin.alter_scram_credential(bootstrap, user, ku.MECHANISM_CODE, None, auth)
            elif new or ku.MECHANISM_CODE not in held_mechanisms:
                await kafka_admin.alter_scram_credential(bootstrap, user, ku.MECHANISM_CODE,
                                                         ku.salted_upsertion(password), auth)
            desired = ku.desired_acls(user, spec)
            create, delete = ku.acl_changes(desired, map(ku.AclBinding._make,
                                                          await kafka_admin.describe_acls(bootstrap, ku.principal(user), auth)))
            await kafka_admin.delete_acls(bootstrap, delete, auth)
            await kafka_admin.create_acls(bootstrap, create, auth)
            owner = await _quota_owner(kube, KAFKA_USER.kind, body)
            conflict = None if owner == (KAFKA_USER.kind, user) else (
                f"quotas not applied: {owner[0]} {owner[1]} already sets the quota of user {user} in cluster "
                f"{spec['clusterRef']['name']} (the oldest resource owns an entity)")
            ops = None if conflict else ku.quota_ops(spec, previously_managed=bool(previous.get("quotas")))
            if ops is not None:
                await kafka_admin.alter_client_quota(bootstrap, {"user": user}, ops, auth)
        except kafka_admin.AdminError as exc:
            await _user_status(memo, body, False, "Unreachable", str(exc), extra)
            return
        extra.update({"acls": len(desired), "quotas": ku.applied_quotas(ops), "quotaConflict": conflict})
        changes = f"; {len(create)} ACL(s) created, {len(delete)} deleted" if create or delete else ""
        kind = "TLS" if tls else "SCRAM-SHA-512"
        await _user_status(memo, body, True, "Applied",
                           f"{kind} user {user} with {len(desired)} ACL(s){changes}" +
                           (f"; {conflict}" if conflict else ""), extra)


@kopf.on.resume(GROUP, VERSION, KAFKA_USER.plural)
@kopf.on.create(GROUP, VERSION, KAFKA_USER.plural)
@kopf.on.update(GROUP, VERSION, KAFKA_USER.plural)
async def kafkauser_changed(namespace: str, name: str, memo: kopf.Memo, **_: Any) -> None:
    await reconcile_kafka_user(memo, namespace, name)


@kopf.on.event(GROUP, VERSION, KAFKA_USER.plural)
async def kafkauser_deleted(event: dict[str, Any], body: kopf.Body, memo: kopf.Memo, logger: logging.Logger,
                            **_: Any) -> None:
    """Deleting the resource removes the user's credential, ACLs and quotas from the cluster once
    the deletion is seen; the garbage collector deletes its Secret. No finalizer (see
    clientquota_deleted): a KafkaUser deleted while the operator is down keeps its credential and
    ACLs in the brokers (docs/operator.md says how to remove them)."""
    if event.get("type") != "DELETED" or "kube" not in memo:
        return
    meta, spec = body["metadata"], dict(body.get("spec") or {})
    user = meta["name"]
    try:
        parse_spec(KAFKA_USER, spec)
    except ValueError:
        return
    try:
        bootstrap, auth, _ = await _admin_address(memo, meta["namespace"], spec["clusterRef"]["name"],
                                                  require_ready=False)
        if not bootstrap:
            return  # no cluster to hold it
        for attempt in range(QUOTA_REMOVAL_ATTEMPTS):  # the cluster may be briefly unreachable
            try:
                await kafka_admin.alter_scram_credential(bootstrap, user, ku.MECHANISM_CODE, None, auth)
                held = await kafka_admin.describe_acls(bootstrap, ku.principal(user), auth)
                await kafka_admin.delete_acls(bootstrap, held, auth)
                if (spec.get("quotas") or (body.get("status") or {}).get("quotas")) and await _quota_owner(
                        memo["kube"], KAFKA_USER.kind, dict(body)) == (KAFKA_USER.kind, user):
                    await kafka_admin.alter_client_quota(bootstrap, {"user": user}, cq.removal_ops(), auth)
                break
            except kafka_admin.AdminError:
                if attempt == QUOTA_REMOVAL_ATTEMPTS - 1:
                    raise
                await asyncio.sleep(RETRY_DELAY / 2)
        await _emit(memo["kube"], dict(body), [ev.Event(ev.NORMAL, ev.USER_REMOVED,
                                                        f"credential, {len(held)} ACL(s) and quotas of {user} removed")])
    except (ApiError, kafka_admin.AdminError) as exc:
        logger.warning(f"KafkaUser {meta['namespace']}/{user} deleted; removing it from the cluster failed: {exc}")


# ------------------------------------------------------------------------------------------
# RecordDeletion (KIP-107): a schedule per resource (schedules.py) runs the deletion once per
# generation, or every spec.interval; the DELETED event stops it (nothing is deleted then).

RD_POLL_S = 1.0  # how often a waiting schedule looks at its (live) body for a new generation


@dataclass
class _DeletionSchedule:
    """A schedule's memory between runs (the status written may not have come back yet)."""

    generation: int | None = None
    due: datetime | None = None
    paused: bool | None = None


async def run_record_deletion(memo: kopf.Memo, namespace: str, name: str, now: datetime) -> datetime | None:
    """One attempt: read the latest object, delete what its policy names, write the status.
    Returns when the next attempt is due (None: not until the spec changes)."""
    kube: Kube = memo["kube"]
    with metrics.observe(RECORD_DELETION.kind):
        body = await kube.get(RECORD_DELETION.kind, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        gen = int(body["metadata"].get("generation") or 1)
        previous = body.get("status") or {}
        if paused(body["metadata"]):
            status = paused_status(previous, generation=gen, now=now)
            if not same_status(previous, status):
                await kube.patch_status(RECORD_DELETION.kind, namespace, name, status)
            await _emit(kube, body, ev.pause_events(previous, status))
            return None  # the daemon notices the annotation's removal
        spec, policy, interval = None, None, None
        try:
            spec = parse_spec(RECORD_DELETION, dict(body.get("spec") or {}))
            assert isinstance(spec, RecordDeletionSpec)
            policy = rd.policy_summary(spec)
            interval = rd.interval_of(spec)
        except ValueError as exc:
            error = rd.PlanError("InvalidSpec", str(exc), retry=False)
        except rd.PlanError as exc:
            error = exc
        else:
            error = None
        result, ran = record_admin.RunResult(), False
        if error is None:
            bootstrap, auth, why = await _admin_address(memo, namespace, spec.cluster_ref.name, require_ready=True)
            if bootstrap is None:
                error = rd.PlanError("ClusterNotReady", why)
            else:
                result = await asyncio.to_thread(record_admin.run, bootstrap, spec, now, auth)
                error, ran = result.error, True
        failures: dict[tuple[str, str], int] = memo.setdefault("rd_failures", {})
        key = (namespace, name)
        if error is None:
            failures.pop(key, None)
            next_time = None if interval is None else now + interval
        elif error.retry:
            failures[key] = failures.get(key, 0) + 1
            next_time = now + rd.backoff(failures[key], interval)
        else:
            next_time = None
        status = rd.run_status(previous=previous, generation=gen, policy=policy, now=now, ran=ran,
                               rows=result.rows, deleted=result.deleted, error=error, next_time=next_time)
        await kube.patch_status(RECORD_DELETION.kind, namespace, name, status)
        await _emit(kube, body, ev.pause_events(previous, status) + ev.deletion_events(
            previous, status, ran=ran, deleted=result.deleted, topic=getattr(spec, "topic", None)))
        if result.deleted:
            metrics.RECORDS_DELETED.labels(namespace, name).inc(result.deleted)
        if error is None:
            metrics.DELETION_LAST_SUCCESS.labels(namespace, name).set(now.timestamp())
        log.info("RecordDeletion %s/%s: %s", namespace, name, status["conditions"][0]["message"])
        return next_time


async def _resume_record_deletion(memo: kopf.Memo, namespace: str, name: str) -> None:
    """The pause annotation is gone: drop ReconciliationPaused now (the next run may be far off)."""
    kube: Kube = memo["kube"]
    fresh = await kube.get(RECORD_DELETION.kind, namespace, name)
    previous = (fresh or {}).get("status") or {}
    if fresh is None or not is_paused(previous):
        return
    status = resumed_status(previous)
    await kube.patch_status(RECORD_DELETION.kind, namespace, name, status)
    await _emit(kube, fresh, ev.pause_events(previous, status))


async def _record_deletion_schedule(memo: kopf.Memo, namespace: str, name: str, schedule: Schedule) -> None:
    """Run when a generation is new (or its last run failed), then every interval; wait otherwise.
    schedule.body is the latest watched object: a spec change is noticed within RD_POLL_S."""
    state = _DeletionSchedule()
    key = (namespace, name)
    failures: dict[tuple[str, str], int] = memo.setdefault("rd_failures", {})
    while not schedule.stopped.is_set():
        now = datetime.now(timezone.utc)
        body = schedule.body
        gen = int(body.get("metadata", {}).get("generation") or 1)
        hold = paused(body.get("metadata"))
        flipped = hold != state.paused
        if flipped and state.paused:
            # Resumed: the paused condition goes now; runs are due as the stored status says.
            state.generation = None
            await _resume_record_deletion(memo, namespace, name)
        state.paused = hold
        if state.generation != gen:
            fresh = await memo["kube"].get(RECORD_DELETION.kind, namespace, name)
            status = (fresh or {}).get("status") or {}
            try:
                spec = parse_spec(RECORD_DELETION, dict((fresh or {}).get("spec") or {}))
                interval = rd.interval_of(spec)  # type: ignore[arg-type]
                # First look at this generation: the stored status says whether it already ran.
                first = state.generation is None
                state.due = rd.next_run(interval=interval, generation=gen, status=status, now=now) if first else now
            except (ValueError, rd.PlanError):
                state.due = now  # the run reports the invalid spec, once
            state.generation = gen
        if flipped and hold:
            state.due = now  # one run writes the paused status (and runs nothing)
        if state.due is not None and state.due <= now:
            try:
                state.due = await run_record_deletion(memo, namespace, name, now)
            except Exception as exc:  # an API hiccup: try again after the backoff
                failures[key] = failures.get(key, 0) + 1
                log.warning("RecordDeletion %s/%s: %s", namespace, name, exc)
                state.due = now + rd.backoff(failures[key], None)
            continue
        wait = RD_POLL_S if state.due is None else min(RD_POLL_S, (state.due - now).total_seconds())
        try:
            await asyncio.wait_for(schedule.stopped.wait(), max(0.05, wait))
        except asyncio.TimeoutError:
            pass


@kopf.on.event(GROUP, VERSION, RECORD_DELETION.plural)
async def recorddeletion_event(event: dict[str, Any], body: kopf.Body, namespace: str, name: str, memo: kopf.Memo,
                               **_: Any) -> None:
    """Start, feed or stop the resource's schedule. An event handler, not a kopf daemon: kopf puts
    a finalizer on every resource with a daemon, and a finalizer holds the resource, and so its
    namespace's deletion, for as long as the operator is away. On deletion nothing needs doing in
    Kafka (a RecordDeletion deletes records when it runs, never when it goes): the schedule stops
    after its current run and the resource's metrics go. A finalizer left by an older operator
    version is removed by kopf, which sees no handler needing it."""
    if "kube" not in memo:
        return
    schedules: Schedules = memo["rd_schedules"]
    key = (namespace, name)
    if event.get("type") == "DELETED" or body.get("metadata", {}).get("deletionTimestamp"):
        schedules.gone(key)
        metrics.forget_record_deletion(namespace, name)
        memo.setdefault("rd_failures", {}).pop(key, None)
        return
    schedules.seen(key, dict(body), lambda s: _record_deletion_schedule(memo, namespace, name, s))
