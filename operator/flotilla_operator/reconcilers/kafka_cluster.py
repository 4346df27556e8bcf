"""A KafkaCluster into its children, as a chain of named steps (Strimzi's KafkaReconciler).

`reconcile` runs `KafkaClusterReconciler.reconcile`: read the object, then each step in turn
(parse the spec, choose the cluster id, decide the scale, issue certificates, render and check
the configuration, record the cluster id, replace an immutable StatefulSet, open the roll gate,
refuse foreign children, ensure broker credentials, apply, acknowledge a restart, diagnose the
pods) and write the status. A step either records what it found for the next or stops the run: with a status saying
why and an exception kopf retries (TemporaryError) or not (PermanentError). Builders decide;
clients/ sends. `refresh_status` recomputes the status alone, from a StatefulSet or Lease event.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import kopf

from .. import events as ev
from .. import metrics
from ..annotations import acknowledge_patch, live_restart_token, paused, restart_token
from ..api.common import parse_spec
from ..api.kafka_cluster import KAFKA_CLUSTER, KafkaClusterSpec
from ..builders import Desired, build_all
from ..builders import certificates as certs
from ..builders import cluster_id as cid
from ..builders.common import Owner, foreign, selector_string, statefulset_name
from ..builders.external_addresses import (broker_addresses, certificate_addresses, ingress_address,
                                           load_balancer_listeners, pending_brokers)
from ..builders.pod_problems import PodProblem
from ..builders.roll import TEMPLATE_HASH_ANNOTATION, RollDecision, roll_partition, roll_state
from ..builders.scale_down import ScaleDecision, scale_decision
from ..builders.services import EXTERNAL_LABEL, stale_external_services
from ..builders.statefulset import POD_MANAGEMENT_POLICY
from ..clients.certificates import CertificateError, CertificatesPending, ensure_cluster_certificates
from ..clients.credentials import CredentialsError, ensure_broker_credentials
from ..clients.kube import ApiError, Kube
from ..preflight import check_server_properties
from ..settings import Settings
from ..status import is_paused, kafka_cluster_status, paused_status, same_status
from .common import LEASE_ROLE_LABEL, RETRY_DELAY, cluster_objects, emit, lock, log
from .pod_problems import forget as forget_pod_problems
from .pod_problems import new_problem_events, read_pod_problems


async def reconcile(memo: kopf.Memo, namespace: str, name: str, *, why: str) -> dict[str, Any] | None:
    """Apply every child of one KafkaCluster and write its status. Returns the status written."""
    kube: Kube = memo["kube"]
    async with lock(memo, namespace, name):
        with metrics.observe(KAFKA_CLUSTER.kind):
            body = await kube.get(KAFKA_CLUSTER.kind, namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                metrics.forget_cluster(namespace, name)
                forget_pod_problems(memo, namespace, name)
                return None
            return await KafkaClusterReconciler(memo, body).reconcile(why)


class KafkaClusterReconciler:
    """One run over one KafkaCluster, as read at its start; each step leaves what it found here."""

    def __init__(self, memo: kopf.Memo, body: dict[str, Any]) -> None:
        self.memo = memo
        self.kube: Kube = memo["kube"]
        self.settings: Settings = memo["settings"]
        self.body = body
        self.owner = Owner.from_body(body)
        self.namespace, self.name = self.owner.namespace, self.owner.name
        self.previous: dict[str, Any] = body.get("status") or {}
        self.spec: KafkaClusterSpec
        self.statefulset: dict[str, Any] | None = None  # the live one, until apply_children
        self.identity: cid.ClusterIdChoice
        self.scale: ScaleDecision
        self.token: str | None = None
        self.restart_requested = False
        self.replicas = 0  # brokers that need certificates and addresses: the larger of spec and StatefulSet
        self.addresses: dict[str, str] = {}
        self.certificate_generation: str | None = None
        self.draft: Desired
        self.replacing = False
        self.live_partition: int | None = None
        self.was_waiting = False
        self.roll_started: list[ev.Event] = []
        self.roll: RollDecision
        self.desired: Desired
        self.applied: dict[str, Any] | None = None  # the StatefulSet as applied
        self.pod_problems: list[PodProblem] = []

    async def reconcile(self, why: str) -> dict[str, Any]:
        """The chain of steps, in order; returns the status written."""
        if paused(self.body["metadata"]):
            return await self.report_paused()
        await self.parse_spec()
        await self.read_statefulset()
        await self.choose_cluster_id()
        await self.decide_scale()
        self.decide_restart()
        await self.find_load_balancer_addresses()
        await self.ensure_certificates()
        await self.render_and_check_config()
        await self.record_cluster_id()
        await self.replace_statefulset_if_needed()
        await self.decide_roll()
        await self.refuse_foreign_children()
        await self.ensure_broker_credentials()
        await self.apply_children()
        await self.acknowledge_restart()
        await self.diagnose_pods()
        return await self.write_status(why)

    # -- the steps ----------------------------------------------------------------------------

    async def report_paused(self) -> dict[str, Any]:
        """The pause annotation is set: change nothing, say ReconciliationPaused."""
        status = paused_status(self.previous, generation=self.owner.generation)
        if not same_status(self.previous, status):
            await self.kube.patch_status(KAFKA_CLUSTER.kind, self.namespace, self.name, status)
        await self.emit(cluster_events(self.memo, self.namespace, self.name, self.previous, status))
        return status

    async def parse_spec(self) -> None:
        """Validate the spec as the CRD does; an invalid one is reported and never retried."""
        try:
            spec = parse_spec(KAFKA_CLUSTER, self.body.get("spec") or {})
        except ValueError as exc:
            status = kafka_cluster_status(
                self.owner, replicas=0, port=9092, config_hash=None, statefulset=None,
                previous=self.previous, error=str(exc), error_reason="InvalidSpec",
            )
            await self.kube.patch_status(KAFKA_CLUSTER.kind, self.namespace, self.name, status)
            await self.emit(cluster_events(self.memo, self.namespace, self.name, self.previous, status))
            raise kopf.PermanentError(f"invalid spec: {exc}") from exc
        assert isinstance(spec, KafkaClusterSpec)
        self.spec = spec

    async def read_statefulset(self) -> None:
        self.statefulset = await self.kube.get("StatefulSet", self.namespace, statefulset_name(self.owner))

    async def choose_cluster_id(self) -> None:
        """The fleet's cluster.id (builders/cluster_id.py); one that contradicts the brokers'
        volumes applies nothing: the brokers keep running with the id they hold."""
        self.identity = await _cluster_id(self.kube, self.owner, self.spec, self.previous)
        if self.identity.error:
            await self.stop(self.identity.error, "InvalidSpec", self.statefulset)
            raise kopf.PermanentError(self.identity.error)

    async def decide_scale(self) -> None:
        """How many brokers the StatefulSet may have (never fewer than hold replicas), and how many
        need certificates and addresses (the larger of that and spec.replicas)."""
        self.scale = await _scale(self.kube, self.memo, self.owner, self.spec, self.statefulset)
        self.replicas = max(self.spec.replicas, self.scale.replicas or 0)

    def decide_restart(self) -> None:
        """The restart token on the pod template: a new one when the annotation asks for a restart."""
        self.token, self.restart_requested = restart_token(self.body["metadata"], self.statefulset,
                                                           datetime.now(timezone.utc))

    async def find_load_balancer_addresses(self) -> None:
        self.addresses = await _load_balancer_addresses(self.kube, self.owner, self.spec, self.replicas)

    async def ensure_certificates(self) -> None:
        """Issue or renew the brokers' certificates before the StatefulSet: a broker never starts
        without its certificate."""
        try:
            certificates = await ensure_cluster_certificates(
                self.kube, self.owner, self.spec, replicas=self.replicas,
                external_addresses=certificate_addresses(self.spec, self.replicas, self.addresses))
        except CertificateError as exc:
            await self.stop(f"certificates: {exc}",
                            "CertificatesPending" if isinstance(exc, CertificatesPending) else "ApplyFailed",
                            self.statefulset)
            raise kopf.TemporaryError(f"certificates: {exc}", delay=RETRY_DELAY) from exc
        await self.emit([ev.Event(ev.NORMAL, ev.CERTIFICATES_ISSUED, line) for line in certificates.issued])
        self.certificate_generation = certificates.generation

    async def render_and_check_config(self) -> None:
        """Build every child once (before the roll gate) and check the brokers' server.properties:
        a configuration the broker would refuse applies nothing."""
        self.draft = self.build()
        problem = check_server_properties(self.draft.server_properties)
        if problem:
            message = f"spec.config: the broker would refuse it: {problem}"
            await self.stop(message, "InvalidConfig", self.statefulset)
            raise kopf.PermanentError(message)

    async def record_cluster_id(self) -> None:
        """Write the record that outlives the KafkaCluster, once."""
        if self.identity.needs_record and await self.kube.create(
                cid.build_record(self.owner, self.identity.cluster_id)) is None:
            raise kopf.TemporaryError("the cluster id record appeared meanwhile: choosing again", delay=1)

    async def replace_statefulset_if_needed(self) -> None:
        """podManagementPolicy is immutable: a StatefulSet with another one is deleted orphaning its
        pods and re-created (from its DELETED event)."""
        self.replacing = _needs_replacing(self.statefulset)
        if not self.replacing:
            return
        current = self.statefulset
        assert current is not None
        if not current["metadata"].get("deletionTimestamp"):
            await self.emit([ev.Event(ev.NORMAL, ev.STATEFULSET_REPLACED, (
                f"re-creating StatefulSet {current['metadata']['name']} with podManagementPolicy "
                f"{POD_MANAGEMENT_POLICY}; its pods and claims are kept"))])
        await _replace_statefulset(self.kube, current)
        self.statefulset = None

    async def decide_roll(self) -> None:
        """The roll gate (builders/roll.py): the StatefulSet's partition opens for one broker at a
        time while the fleet is whole; then every child is built with that partition."""
        current = self.statefulset
        self.live_partition = _live_partition(current)
        self.was_waiting = (self.namespace, self.name) in self.memo.get("roll_waiting", ())
        self.roll_started = ev.roll_started(((current or {}).get("metadata", {}).get("annotations") or {}).get(
            TEMPLATE_HASH_ANNOTATION) if current else None, self.draft.template_hash,
            int(((current or {}).get("spec") or {}).get("replicas") or 0))
        self.roll = await _roll(self.kube, self.memo, self.owner, current, self.draft, self.scale.replicas)
        self.desired = self.build(partition=self.roll.partition)

    async def refuse_foreign_children(self) -> None:
        """Apply nothing when a child's name is held by an object the fleet did not create: applying
        would make the KafkaCluster the owner of someone else's object."""
        conflict = await _foreign_child(self.kube, self.owner, self.desired, self.statefulset)
        if conflict:
            await self.stop(conflict, "Conflict", self.statefulset)
            raise kopf.PermanentError(conflict)

    async def ensure_broker_credentials(self) -> None:
        """The brokers' own SCRAM user, before pods that read it start."""
        try:
            await ensure_broker_credentials(self.kube, self.body)
        except CredentialsError as exc:
            raise kopf.TemporaryError(str(exc), delay=RETRY_DELAY) from exc

    async def apply_children(self) -> None:
        """Server-side apply every child (the StatefulSet last of its kind to be re-created when
        being replaced), then delete external Services the spec no longer asks for."""
        obj: dict[str, Any] = {}
        try:
            for obj in self.desired.objects:
                if obj["kind"] == "StatefulSet":
                    if self.replacing:
                        continue  # re-created once the old one is gone (its DELETED event)
                    self.applied = await self.kube.apply(obj)
                else:
                    await self.kube.apply(obj)
            obj = {"kind": "Service", "metadata": {"name": "(external, removed)"}}
            await _remove_stale_external_services(self.kube, self.owner, self.desired)
        except ApiError as err:
            message = f"applying {obj['kind']} {obj['metadata']['name']}: {err.reason}"
            current = await self.kube.get("StatefulSet", self.namespace, self.desired.statefulset["metadata"]["name"])
            await self.stop(message, "ApplyFailed", current, self.desired.config_hash)
            raise kopf.TemporaryError(message, delay=RETRY_DELAY) from err

    async def acknowledge_restart(self) -> None:
        """The new restart token is on the pod template: remove the annotation that asked for it
        (the roll gate restarts the brokers from here)."""
        if self.restart_requested and self.applied is not None:
            await self.kube.patch(KAFKA_CLUSTER.kind, self.namespace, self.name, acknowledge_patch())
            await self.emit([ev.Event(ev.NORMAL, ev.ROLLING_RESTART_REQUESTED, (
                f"restarting every broker one at a time (pod template {self.token}); annotation removed"))])

    async def diagnose_pods(self) -> None:
        """Why brokers do not run, from their pods and claims (builders/pod_problems.py): an image
        that cannot be pulled, an unschedulable pod, a claim left Pending, a crash loop."""
        self.pod_problems = await read_pod_problems(self.kube, self.owner)

    async def write_status(self, why: str) -> dict[str, Any]:
        """The status from what the StatefulSet, the Leases and the pods report, the roll's and the
        pod problems' Events, metrics."""
        spec, namespace, name = self.spec, self.namespace, self.name
        status = kafka_cluster_status(
            self.owner, replicas=spec.replicas, port=spec.listeners[0].port,
            config_hash=self.desired.config_hash, statefulset=self.applied, previous=self.previous,
            leases=await _leases(self.kube, namespace, name), scale=self.scale,
            cluster_id=self.identity.cluster_id, roll=self.roll, pod_problems=self.pod_problems,
        )
        if not same_status(self.previous, status):
            await self.kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, status)
        await self.emit(new_problem_events(self.memo, namespace, name, self.pod_problems))
        if self.applied is not None:
            await self.emit(self.roll_started + ev.roll_events(
                name, self.live_partition, self.roll.partition, self.roll.restarting, self.roll.waiting,
                self.was_waiting))
        await self.emit(cluster_events(self.memo, namespace, name, self.previous, status))
        if self.applied is not None and self.roll_started:
            # Remembered after this run's status: the roll it starts cannot have finished yet.
            self.memo.setdefault("rolling", set()).add((namespace, name))
        metrics.observe_cluster(namespace, name, spec.replicas, status, self.previous.get("rebalance"))
        log.debug("reconciled %s/%s (%s): %s", namespace, name, why, status["conditions"][0]["reason"])
        return status

    # -- helpers of the steps -----------------------------------------------------------------

    def build(self, **extra: Any) -> Desired:
        return build_all(self.owner, self.spec, image=self.settings.broker_image,
                         pull_policy=self.settings.image_pull_policy, statefulset_replicas=self.scale.replicas,
                         cluster_id=self.identity.cluster_id, restart_token=self.token,
                         certificate_generation=self.certificate_generation, external_addresses=self.addresses,
                         **extra)

    async def emit(self, events: list[ev.Event]) -> None:
        await emit(self.kube, self.body, events)

    async def stop(self, message: str, reason: str, statefulset: dict[str, Any] | None,
                   digest: str | None = None) -> None:
        """The status and Events of a run that stops at `message` (what it did not apply)."""
        status = kafka_cluster_status(
            self.owner, replicas=self.spec.replicas, port=self.spec.listeners[0].port, config_hash=digest,
            statefulset=statefulset, previous=self.previous, error=message, error_reason=reason,
            cluster_id=self.identity.cluster_id,
        )
        await self.kube.patch_status(KAFKA_CLUSTER.kind, self.namespace, self.name, status)
        await self.emit(cluster_events(self.memo, self.namespace, self.name, self.previous, status))


async def refresh_status(memo: kopf.Memo, namespace: str, name: str, statefulset: dict[str, Any] | None = None) -> None:
    """Recompute a KafkaCluster's status from an event of its StatefulSet or of its Leases."""
    kube: Kube = memo["kube"]
    op: Settings = memo["settings"]
    async with lock(memo, namespace, name):
        body = await kube.get(KAFKA_CLUSTER.kind, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            metrics.forget_cluster(namespace, name)
            forget_pod_problems(memo, namespace, name)
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
        problems = await read_pod_problems(kube, owner)
        status = kafka_cluster_status(
            owner, replicas=spec.replicas, port=spec.listeners[0].port,
            config_hash=desired.config_hash, statefulset=statefulset, previous=previous,
            leases=await _leases(kube, namespace, name), scale=scale,
            cluster_id=identity.cluster_id, roll=roll, pod_problems=problems,
        )
        if not same_status(previous, status):
            await kube.patch_status(KAFKA_CLUSTER.kind, namespace, name, status)
        await emit(kube, body, new_problem_events(memo, namespace, name, problems))
        await emit(kube, body, cluster_events(memo, namespace, name, previous, status))
        metrics.observe_cluster(namespace, name, spec.replicas, status, previous.get("rebalance"))


def cluster_events(memo: kopf.Memo, namespace: str, name: str, previous: dict[str, Any],
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


# -- what the events of a cluster's other objects mean ------------------------------------------

def partition_moves(statefulset: dict[str, Any]) -> bool:
    """A roll is under way or held: the partition must follow the brokers (reconcile applies it)."""
    spec, st = statefulset.get("spec") or {}, statefulset.get("status") or {}
    partition = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition") or 0
    return bool(partition) or st.get("currentRevision") != st.get("updateRevision")


def new_load_balancer_address(memo: kopf.Memo, namespace: str, service: dict[str, Any]) -> str | None:
    """The address a broker's load balancer got or changed to since the last event (None: no news)."""
    seen: dict[tuple[str, str], str | None] = memo.setdefault("load_balancer_addresses", {})
    key = (namespace, service.get("metadata", {}).get("name", ""))
    address = ingress_address(service)
    if seen.get(key) == address:
        return None
    seen[key] = address
    return address


def lease_holder_changed(memo: kopf.Memo, namespace: str, lease: dict[str, Any], deleted: bool) -> bool:
    """A broker registered or left, or the controller changed; renewals (the same holder) are not."""
    holders: dict[tuple[str, str], Any] = memo.setdefault("lease_holders", {})
    key = (namespace, lease.get("metadata", {}).get("name", ""))
    holder = None if deleted else (lease.get("spec") or {}).get("holderIdentity")
    if key in holders and holders[key] == holder:
        return False
    holders[key] = holder
    return True


def waits_for_topics(memo: kopf.Memo, namespace: str, cluster: str) -> bool:
    """The cluster's scale-down is blocked or its roll waits for an ISR: a KafkaTopic change may
    release it."""
    key = (namespace, cluster)
    return key in memo.get("scale_blocked", ()) or key in memo.get("roll_waiting", ())


# -- what the steps read and decide -----------------------------------------------------------

async def _leases(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]] | None:
    """The cluster's broker and controller Leases (for registeredBrokers/controller); None if
    they cannot be read, so a status is still written."""
    try:
        return await cluster_objects(kube, "Lease", namespace, name, label_selector=LEASE_ROLE_LABEL)
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
        topics = await cluster_objects(kube, "KafkaTopic", owner.namespace, owner.name)
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
        topics = await cluster_objects(kube, "KafkaTopic", owner.namespace, owner.name)
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
    existing = await cluster_objects(kube, "Service", owner.namespace, owner.name, label_selector=EXTERNAL_LABEL)
    for name in stale_external_services(existing, [o for o in desired.objects if o["kind"] == "Service"]):
        await kube.delete("Service", owner.namespace, name)


async def _load_balancer_addresses(kube: Kube, owner: Owner, spec: KafkaClusterSpec, replicas: int) -> dict[str, str]:
    """The addresses the cloud has given the brokers' load balancers so far (external_addresses.py);
    the rest are logged as pending (their brokers wait for them before they start)."""
    if not load_balancer_listeners(spec):
        return {}
    services = await cluster_objects(kube, "Service", owner.namespace, owner.name, label_selector=EXTERNAL_LABEL)
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


def _live_partition(statefulset: dict[str, Any] | None) -> int | None:
    if statefulset is None:
        return None
    rolling = ((statefulset.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
    return int(rolling.get("partition") or 0)
