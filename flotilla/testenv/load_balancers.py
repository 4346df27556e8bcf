"""A stand-in for a cloud's service controller on the real node: it gives LoadBalancer Services
addresses, as GKE, EKS or MetalLB would.

Every LoadBalancer Service without one gets the next free address of node.LOAD_BALANCER_SUBNET in
status.loadBalancer.ingress. kube-proxy then does what it does in a cloud: traffic to that address
and the Service's port goes to the Service's pods (its iptables rules for load balancer IPs), and
the subnet is routed to the node's bridge, so a client on the host reaches it as a client outside
the cluster would reach a cloud load balancer.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from typing import Any, Callable

from .node import LOAD_BALANCER_SUBNET

Kubectl = Callable[..., Any]  # KubeEnv.kubectl: (*args, input=, check=, timeout=) -> CompletedProcess


def _ingress_ips(service: dict[str, Any]) -> list[str]:
    return [i["ip"] for i in ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
            if i.get("ip")]


def assign_addresses(kubectl: Kubectl) -> dict[str, str]:
    """One pass: give every LoadBalancer Service without an address the next free one. Returns
    {namespace/name: address} of those it assigned."""
    services = json.loads(kubectl("get", "services", "-A", "-o", "json").stdout)["items"]
    balanced = [s for s in services if (s.get("spec") or {}).get("type") == "LoadBalancer"]
    used = {ip for s in balanced for ip in _ingress_ips(s)}
    free = (str(ip) for ip in ipaddress.ip_network(LOAD_BALANCER_SUBNET).hosts() if str(ip) not in used)
    assigned = {}
    for service in balanced:
        if _ingress_ips(service):
            continue
        meta = service["metadata"]
        address = next(free)
        patch = {"status": {"loadBalancer": {"ingress": [{"ip": address, "ipMode": "VIP"}]}}}
        done = kubectl("patch", "service", meta["name"], "-n", meta["namespace"], "--subresource=status",
                       "--type=merge", "-p", json.dumps(patch), check=False)
        if done.returncode == 0:
            assigned[f"{meta['namespace']}/{meta['name']}"] = address
    return assigned


class LoadBalancerController:
    """assign_addresses every `interval` seconds in a thread, while the `with` block runs."""

    def __init__(self, kubectl: Kubectl, interval: float = 1.0) -> None:
        self._kubectl = kubectl
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="load-balancers", daemon=True)
        self.assigned: dict[str, str] = {}
        self.errors: list[str] = []

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.assigned.update(assign_addresses(self._kubectl))
            except Exception as exc:  # the API server restarting: the next pass retries
                self.errors.append(repr(exc))
            self._stop.wait(self._interval)

    def __enter__(self) -> LoadBalancerController:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
