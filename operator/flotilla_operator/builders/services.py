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
    """<name>-bootstrap.<ns>.svc: a ClusterIP over the ready brokers, for a client's first connection."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(owner, bootstrap_service_name(owner)),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(owner),
            "ports": _ports(spec),
        },
    }
