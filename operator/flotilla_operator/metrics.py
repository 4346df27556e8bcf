"""The operator's own Prometheus metrics: reconcile counts, durations and errors; per-KafkaCluster
gauges (brokers, controller, rebalance) that the shipped alerts and dashboards read."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from .builders import rebalance as rb

RECONCILE_TOTAL = Counter(
    "flotilla_operator_reconcile",
    "Reconciliations finished, by kind and result (success or error).",
    ["kind", "result"],
)
RECONCILE_ERRORS = Counter(
    "flotilla_operator_reconcile_errors",
    "Reconciliations that failed, by kind and reason.",
    ["kind", "reason"],
)
RECONCILE_SECONDS = Histogram(
    "flotilla_operator_reconcile_duration_seconds",
    "Time spent in one reconciliation, by kind.",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)
READY_BROKERS = Gauge(
    "flotilla_operator_ready_brokers",
    "Ready brokers per KafkaCluster, as last observed.",
    ["namespace", "name"],
)
DESIRED_BROKERS = Gauge(
    "flotilla_operator_desired_brokers",
    "Brokers a KafkaCluster asks for (spec.replicas); a broker is not Ready while ready_brokers is below it.",
    ["namespace", "name"],
)
REGISTERED_BROKERS = Gauge(
    "flotilla_operator_registered_brokers",
    "Brokers of a KafkaCluster holding a live registration Lease, as last observed (status.registeredBrokers).",
    ["namespace", "name"],
)
CONTROLLER = Gauge(
    "flotilla_operator_controller",
    "Node id holding a KafkaCluster's controller Lease, as last observed (-1: none).",
    ["namespace", "name"],
)
REBALANCE_MOVING = Gauge(
    "flotilla_operator_rebalance_moving",
    "1 while the operator moves a KafkaCluster's replicas (status.rebalance.phase Moving), else 0.",
    ["namespace", "name"],
)
REBALANCE_REMAINING = Gauge(
    "flotilla_operator_rebalance_partitions_remaining",
    "Partitions the current rebalance still has to move (partitionsTotal - partitionsMoved).",
    ["namespace", "name"],
)
REBALANCE_PHASES = (rb.IDLE, rb.MOVING, rb.PAUSED, rb.BLOCKED)
REBALANCE_PHASE = Gauge(
    "flotilla_operator_rebalance_phase",
    "1 for the phase status.rebalance is in (Idle, Moving, Paused or Blocked), 0 for the others.",
    ["namespace", "name", "phase"],
)
_CLUSTER_GAUGES = (READY_BROKERS, DESIRED_BROKERS, REGISTERED_BROKERS, CONTROLLER, REBALANCE_MOVING,
                   REBALANCE_REMAINING)

RESOURCE_STALLED = Gauge(
    "flotilla_operator_resource_stalled",
    "1 while a resource's Stalled condition is True (its spec cannot be reconciled as written: InvalidSpec, "
    "InvalidConfig, Conflict, ...), 0 otherwise; as last written to its status, by kind.",
    ["kind", "namespace", "name"],
)
_ELECTION: dict[str, Gauge] = {}

RECORDS_DELETED = Counter(
    "flotilla_operator_records_deleted",
    "Records deleted by a RecordDeletion (its runs' DeleteRecords), by resource.",
    ["namespace", "name"],
)
DELETION_LAST_SUCCESS = Gauge(
    "flotilla_operator_record_deletion_last_success_timestamp_seconds",
    "When a RecordDeletion's last successful run happened (Unix time), by resource.",
    ["namespace", "name"],
)


def observe_cluster(namespace: str, name: str, desired: int, status: dict, rebalance: dict | None = None) -> None:
    """The gauges of one KafkaCluster from the status just computed (Leases only when they were read),
    and the rebalance gauges from the stored status.rebalance, so that an operator restarted under a
    rebalance that does not change (a Blocked one) reports it at once."""
    if rebalance:
        observe_rebalance(namespace, name, rebalance)
    READY_BROKERS.labels(namespace, name).set(status["readyReplicas"])
    DESIRED_BROKERS.labels(namespace, name).set(desired)
    if "registeredBrokers" in status:
        REGISTERED_BROKERS.labels(namespace, name).set(status["registeredBrokers"])
        controller = status.get("controller")
        CONTROLLER.labels(namespace, name).set(-1 if controller is None else controller)


def observe_rebalance(namespace: str, name: str, rebalance: dict) -> None:
    """The rebalance gauges from the status.rebalance just written (alerts watch Blocked and a
    Moving rebalance whose remaining partitions do not go down)."""
    phase = rebalance.get("phase")
    REBALANCE_MOVING.labels(namespace, name).set(1 if phase == rb.MOVING else 0)
    for p in REBALANCE_PHASES:
        REBALANCE_PHASE.labels(namespace, name, p).set(1 if phase == p else 0)
    remaining = int(rebalance.get("partitionsTotal") or 0) - int(rebalance.get("partitionsMoved") or 0)
    REBALANCE_REMAINING.labels(namespace, name).set(max(0, remaining))


def election_gauges() -> tuple[Gauge, Gauge]:
    """`flotilla_operator_leader` and `flotilla_operator_ready`, registered only under
    --leader-elect (a lone operator exports neither, so no alert reads its 0 as "no leader")."""
    if not _ELECTION:
        _ELECTION["leader"] = Gauge(
            "flotilla_operator_leader",
            "1 while this replica holds the operator's election Lease and reconciles, 0 while it stands by.")
        _ELECTION["ready"] = Gauge(
            "flotilla_operator_ready",
            "1 while this replica's /readyz answers 200: the leader with kopf started and its Lease renewed, "
            "or a standby that reads the Lease.")
    return _ELECTION["leader"], _ELECTION["ready"]


def observe_conditions(kind: str, namespace: str, name: str, status: dict) -> None:
    """The Stalled gauge from a status just written (clients/kube.py's on_status hook). A patch
    without conditions (status.rebalance alone) changes nothing; one with them holds them all."""
    conditions = status.get("conditions")
    if conditions is None:
        return
    stalled = any(c.get("type") == "Stalled" and c.get("status") == "True" for c in conditions)
    RESOURCE_STALLED.labels(kind, namespace, name).set(1 if stalled else 0)


def forget_resource(kind: str, namespace: str, name: str) -> None:
    """A deleted resource's Stalled series goes with it."""
    try:
        RESOURCE_STALLED.remove(kind, namespace, name)
    except KeyError:
        pass


def forget_cluster(namespace: str, name: str) -> None:
    """A deleted KafkaCluster leaves no series behind (no alert on brokers nobody wants)."""
    forget_resource("KafkaCluster", namespace, name)
    for metric in _CLUSTER_GAUGES:
        try:
            metric.remove(namespace, name)
        except KeyError:
            pass
    for phase in REBALANCE_PHASES:
        try:
            REBALANCE_PHASE.remove(namespace, name, phase)
        except KeyError:
            pass


def forget_record_deletion(namespace: str, name: str) -> None:
    """A deleted RecordDeletion leaves no series behind (labels stay bounded by live resources)."""
    forget_resource("RecordDeletion", namespace, name)
    for metric in (RECORDS_DELETED, DELETION_LAST_SUCCESS):
        try:
            metric.remove(namespace, name)
        except KeyError:
            pass


@contextmanager
def observe(kind: str) -> Iterator[None]:
    """Count and time one reconciliation; an exception counts as an error (and propagates)."""
    start = time.perf_counter()
    try:
        yield
    except Exception as exc:
        RECONCILE_TOTAL.labels(kind, "error").inc()
        RECONCILE_ERRORS.labels(kind, type(exc).__name__).inc()
        raise
    else:
        RECONCILE_TOTAL.labels(kind, "success").inc()
    finally:
        RECONCILE_SECONDS.labels(kind).observe(time.perf_counter() - start)


class MetricsServer:
    """The /metrics HTTP endpoint, started and stopped with the operator."""

    def __init__(self, host: str, port: int, registry: CollectorRegistry = REGISTRY) -> None:
        self.host, self.requested_port, self.registry = host, port, registry
        self._server = None
        self._thread = None

    def start(self) -> str:
        self._server, self._thread = start_http_server(self.requested_port, addr=self.host, registry=self.registry)
        return self.url

    @property
    def port(self) -> int:
        return self._server.server_address[1] if self._server else self.requested_port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
