"""The headless Service (stable per-broker DNS names) and the bootstrap Service (for clients)."""

from __future__ import annotations

from typing import Any

from ..models import METRICS_PORT, KafkaClusterSpec
from .common import Owner, bootstrap_service_name, headless_service_name, metadata, selector_labels
from .statefulset import port_name


def _ports(spec: KafkaClusterSpec) -> list[dict[str, Any]]:
    return [
        {"name": port_name(i), "port": l.port, "targetPort": l.port, "protocol": "TCP"}
        for i, l in enumerate(spec.listeners)
    ]


def build_headless_service(owner: Owner, spec: KafkaClusterSpec) -> dict[str, Any]:
    """<pod>.<name>-brokers.<ns>.svc resolves to each broker; published before readiness, so that
    brokers can find each other while they start."""
    ports = _ports(spec) + [{"name": "metrics", "port": METRICS_PORT, "targetPort": METRICS_PORT, "protocol": "TCP"}]
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(owner, headless_service_name(owner)),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(owner),
            "ports": ports,
        },
    }


def build_bootstrap_service(owner: Owner, spec: KafkaClusterSpec) -> dict[str, Any]:
    """<name>-bootstrap.<ns>.svc: a ClusterIP over every broker pod, for a client's first connection.

    Not only the Ready ones: Ready means "in the ISR of every partition it holds" (it gates rolls
    and the PodDisruptionBudget), and when a partition's last in-sync replica is lost every other
    broker turns unready although it serves its own partitions; the Service must not empty then.
    A client that reaches a broker still starting is refused and retries, as with any broker."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(owner, bootstrap_service_name(owner)),
        "spec": {
            "type": "ClusterIP",
            "publishNotReadyAddresses": True,
            "selector": selector_labels(owner),
            "ports": _ports(spec),
        },
    }
