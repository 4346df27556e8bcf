"""Run a host process that resolves names as a pod of the real test node does.

The brokers advertise `<pod>.<headless>.<ns>.svc` names that only the cluster DNS answers. A client
on the host (the node is this machine, so pod and Service IPs are routed) runs in its own mount
namespace where /etc/resolv.conf names the kube-dns Service (kube-proxy routes it) with the pod
search path of `ns`; nothing on the host changes.

    subprocess.run(cluster_dns.argv(kube_node_env, ns, [sys.executable, "-c", SCRIPT, ...]))
"""

from __future__ import annotations

from typing import Any


def argv(env: Any, ns: str, command: list[str]) -> list[str]:
    """`command` wrapped so that it sees the cluster DNS of namespace `ns`."""
    from flotilla.testenv import node

    resolv = env.control_plane.directory / f"client-resolv-{ns}.conf"
    resolv.write_text(f"nameserver {node.CLUSTER_DNS_IP}\nsearch {ns}.svc.{node.CLUSTER_DOMAIN} "
                      f"svc.{node.CLUSTER_DOMAIN} {node.CLUSTER_DOMAIN}\noptions ndots:5\n")
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(resolv), *command]
