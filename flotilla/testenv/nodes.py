"""Fake nodes that kwok keeps Ready and whose pods it marks Running and Ready.

They follow kwok's conventions (the `kwok.x-k8s.io/node: fake` annotation, `type: kwok` label) but
carry no taint: they are the only nodes, so every pod should land on them without tolerations.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .control_plane import ControlPlane

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


def create(cp: ControlPlane, count: int) -> None:
    if count == 0:  # a real node instead (`up --kubelet`)
        return
    items = [node_manifest(n) for n in node_names(count)]
    cp.kubectl("apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))


def all_ready(cp: ControlPlane, count: int) -> bool:
    out = cp.kubectl("get", "nodes", "-o", "json").stdout
    ready = 0
    for node in json.loads(out)["items"]:
        if node["metadata"]["name"] not in node_names(count):
            continue
        conditions = node.get("status", {}).get("conditions", [])
        if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions):
            ready += 1
    return ready == count
