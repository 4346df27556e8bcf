"""Fake nodes that kwok keeps Ready and whose pods it marks Running and Ready.

They follow kwok's conventions (the `kwok.x-k8s.io/node: fake` annotation, `type: kwok` label) but
carry no taint: they are the only nodes, so every pod should land on them without tolerations.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Protocol


class Cluster(Protocol):
    """What fake nodes need of their control plane (control_plane.py's ControlPlane): kubectl."""

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess: ...

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
KWOK_VALUE = "fake"


def node_manifest(name: str) -> dict:
    """A Node object for kwok to manage: big enough for any test's pods."""
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "ephemeral-storage": "1Ti"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: KWOK_VALUE, "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "type": "kwok",
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "kubernetes.io/role": "agent",
            },
        },
        "spec": {},
        "status": {"allocatable": capacity, "capacity": capacity},
    }


def node_names(count: int) -> list[str]:
    return [f"kwok-node-{i}" for i in range(count)]


def create(cp: Cluster, count: int) -> None:
    if count == 0:  # a real node instead (`up --kubelet`)
        return
    items = [node_manifest(n) for n in node_names(count)]
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def all_ready(cp: Cluster, count: int) -> bool:
    return not not_ready(cp, count)


def not_ready(cluster: Cluster, count: int) -> dict[str, str]:
    """The fake nodes whose Ready condition is not True, with what it is ("absent" if no node)."""
    out = cluster.kubectl("get", "nodes", "-o", "json").stdout
    seen = {node["metadata"]["name"]: node for node in json.loads(out)["items"]}
    missing = {}
    for name in node_names(count):
        if name not in seen:
            missing[name] = "absent"
            continue
        conditions = seen[name].get("status", {}).get("conditions", [])
        ready = next((c for c in conditions if c["type"] == "Ready"), None)
        if ready is None or ready["status"] != "True":
            missing[name] = f"Ready={ready['status']} ({ready.get('reason')})" if ready else "no Ready condition"
    return missing


class NodesNotReady(RuntimeError):
    pass


def wait_ready(cluster, count: int, timeout: float) -> None:
    """Until every fake node is Ready; raises NodesNotReady naming the others and their condition.
    A failing kubectl (an API server hiccup) is retried and, at the end, reported as what was seen."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            missing: object = not_ready(cluster, count)
        except (subprocess.SubprocessError, ValueError) as exc:
            missing = exc
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise NodesNotReady(f"fake nodes not Ready after {timeout:.0f}s: {missing!r}")
        time.sleep(0.5)
