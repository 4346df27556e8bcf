"""The addresses brokers advertise on LoadBalancer listeners, handed to them in a ConfigMap.

A broker behind its own load balancer must advertise that load balancer's address, which exists
only once the cloud has provisioned it (the Service's status.loadBalancer.ingress) and is not known
when the pod is created. The operator copies each broker Service's address into one ConfigMap,
mounted in every broker pod as a directory (one file per listener and broker, so kubelet refreshes
it in place); a broker's start script waits for its file and advertises what it holds
(builders/statefulset.py). NodePort listeners need none of this: the node's address is in the pod.

On a TLS listener the broker's certificate must name those addresses too (a client verifies the
address it dialled): the operator issues it with them (certificates.py), and the start script also
waits until the certificate file it mounts names them, so it never starts with an older one.
"""

from __future__ import annotations

from typing import Any

from broker.metadata import names

from ..api.kafka_cluster import KafkaClusterSpec, Listener
from .certificates import managed_listeners
from .common import Owner, external_bootstrap_name, external_broker_name, metadata

EXTERNAL_ADDRESSES_DIR = "/etc/flotilla-external"


def external_addresses_name(owner: Owner) -> str:
    return names.external_addresses_name(owner.name)


def load_balancer_listeners(spec: KafkaClusterSpec) -> list[Listener]:
    return [l for l in spec.listeners if l.external is not None and l.external.type == "loadbalancer"]


BOOTSTRAP = "bootstrap"


def address_key(listener: Listener, ordinal: int | str) -> str:
    """The ConfigMap key (and file name) of broker `ordinal`'s address on `listener` (BOOTSTRAP:
    the bootstrap load balancer's)."""
    return f"{listener.name}.{ordinal}"


def tls_load_balancer_listeners(spec: KafkaClusterSpec) -> list[Listener]:
    """LoadBalancer listeners served with the operator's certificates, which must then name the
    load balancers' addresses for clients that verify host names."""
    return [l for l in load_balancer_listeners(spec) if l in managed_listeners(spec)]


def ingress_address(service: dict[str, Any] | None) -> str | None:
    """The first address a cloud assigned to a LoadBalancer Service: an IP (GCP, Azure, MetalLB)
    or a host name (AWS); None while it is being provisioned."""
    for ingress in (((service or {}).get("status") or {}).get("loadBalancer") or {}).get("ingress") or []:
        address = ingress.get("ip") or ingress.get("hostname")
        if address:
            return str(address)
    return None


def broker_addresses(owner: Owner, spec: KafkaClusterSpec, replicas: int,
                     services: list[dict[str, Any]]) -> dict[str, str]:
    """{address_key: address} for every broker whose load balancer has an address (`services`:
    the cluster's external Services as read from the API server)."""
    by_name = {s["metadata"]["name"]: s for s in services}
    found = {}
    for listener in load_balancer_listeners(spec):
        address = ingress_address(by_name.get(external_bootstrap_name(owner, listener.port)))
        if address:
            found[address_key(listener, BOOTSTRAP)] = address
        for ordinal in range(replicas):
            address = ingress_address(by_name.get(external_broker_name(owner, ordinal, listener.port)))
            if address:
                found[address_key(listener, ordinal)] = address
    return found


def pending_brokers(spec: KafkaClusterSpec, replicas: int, addresses: dict[str, str]) -> list[str]:
    """The address keys still waiting for a load balancer, for the status and the logs."""
    return [address_key(l, o) for l in load_balancer_listeners(spec) for o in [BOOTSTRAP, *range(replicas)]
            if address_key(l, o) not in addresses]


def certificate_addresses(spec: KafkaClusterSpec, replicas: int, addresses: dict[str, str]) -> dict[int, tuple[str, ...]]:
    """What each broker's certificate must name beside its cluster DNS names: on every TLS load
    balancer listener, the bootstrap load balancer's address (any broker may answer there) and
    its own, once known."""
    out = {}
    for ordinal in range(replicas):
        names = [addresses[k] for l in tls_load_balancer_listeners(spec)
                 for k in (address_key(l, BOOTSTRAP), address_key(l, ordinal)) if k in addresses]
        if names:
            out[ordinal] = tuple(dict.fromkeys(names))
    return out


def build_external_addresses(owner: Owner, addresses: dict[str, str]) -> dict[str, Any]:
    """The ConfigMap of load balancer addresses (it exists, empty, before any is known, so that
    the brokers' volume mounts and kubelet only has to refresh it)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(owner, external_addresses_name(owner)),
        "data": dict(sorted(addresses.items())),
    }
