"""The headless Service (stable per-broker DNS names), the bootstrap Service (for clients), and
the NodePort or LoadBalancer Services of external listeners."""

from __future__ import annotations

from typing import Any

from ..api.kafka_cluster import METRICS_PORT, KafkaClusterSpec, Listener
from .common import (Owner, bootstrap_service_name, external_bootstrap_name, external_broker_name, headless_service_name,
                     metadata, selector_labels, statefulset_name)
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


EXTERNAL_LABEL = "flotilla.io/external-listener"
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"


def broker_node_port(listener: Listener, ordinal: int) -> int:
    """The nodePort broker `ordinal` advertises on an external listener."""
    assert listener.external is not None and listener.external.node_port is not None
    return listener.external.node_port + 1 + ordinal


def _external_service(owner: Owner, name: str, listener: Listener, node_port: int | None,
                      selector: dict[str, str]) -> dict[str, Any]:
    assert listener.external is not None
    meta = metadata(owner, name)
    meta["labels"] = {**meta["labels"], EXTERNAL_LABEL: listener.name}
    if listener.external.annotations:
        meta["annotations"] = {**meta.get("annotations", {}), **listener.external.annotations}
    port: dict[str, Any] = {"name": "kafka", "port": listener.port, "targetPort": listener.port, "protocol": "TCP"}
    if node_port is not None:
        port["nodePort"] = node_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "type": "LoadBalancer" if listener.external.type == "loadbalancer" else "NodePort",
            # As the bootstrap Service: a broker catching up is still the one its clients must reach.
            "publishNotReadyAddresses": True,
            "selector": selector,
            "ports": [port],
        },
    }


def build_external_services(owner: Owner, spec: KafkaClusterSpec, replicas: int) -> list[dict[str, Any]]:
    """For each external listener: a Service over every broker (bootstrap) and one per broker (its
    pod only). nodeport: at nodePort and nodePort + 1 + ordinal, which that broker advertises with its
    node's address (builders/statefulset.py); loadbalancer: each gets its own load balancer, whose
    address that broker advertises once the cloud has assigned it (builders/external_addresses.py)."""
    out = []
    for listener in spec.listeners:
        if listener.external is None:
            continue
        node_ports = listener.external.type == "nodeport"
        out.append(_external_service(owner, external_bootstrap_name(owner, listener.port), listener,
                                     listener.external.node_port if node_ports else None, selector_labels(owner)))
        for ordinal in range(replicas):
            out.append(_external_service(
                owner, external_broker_name(owner, ordinal, listener.port), listener,
                broker_node_port(listener, ordinal) if node_ports else None,
                {**selector_labels(owner), POD_NAME_LABEL: f"{statefulset_name(owner)}-{ordinal}"}))
    return out


def stale_external_services(existing: list[dict[str, Any]], desired: list[dict[str, Any]]) -> list[str]:
    """Names of this cluster's external Services that are no longer wanted (a removed broker's, a
    listener no longer external), to delete."""
    wanted = {s["metadata"]["name"] for s in desired}
    return sorted(s["metadata"]["name"] for s in existing
                  if EXTERNAL_LABEL in (s["metadata"].get("labels") or {}) and s["metadata"]["name"] not in wanted)
