"""Installing and removing the CRDs of crds/ on the shared test API server, safely across modules.

CRDs are cluster-wide while each test module has its own namespaces, so one module's teardown can
leave a CRD *terminating* for the next: its instances still carry kopf's finalizer after the
operator that would remove it has stopped, the CRD never finishes deleting, and every create of
the next module is refused ("create not allowed while custom resource definition is terminating").
`remove_crds` and `install_crds` therefore release such leftovers (drop their finalizers, as an
operator that is gone for good would want) before they delete or wait.

    install_crds(kube_env)      # every module that needs crds/ applied
    remove_crds(kube_env)       # only where a test must start without them (the Helm chart)
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import yaml

CRD_DIR = Path(__file__).resolve().parents[3] / "crds"


def crd_names() -> list[str]:
    """The CRDs of crds/ (which also holds the admission policies on deleting KafkaTopics)."""
    docs = [yaml.safe_load(p.read_text()) for p in CRD_DIR.glob("*.yaml")]
    return sorted(d["metadata"]["name"] for d in docs if d["kind"] == "CustomResourceDefinition")


def _get(env: Any, *args: str) -> dict | None:
    proc = env.kubectl("get", *args, "-o", "json", check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 and proc.stdout.strip() else None


def release_instances(env: Any, crd: str) -> int:
    """Drops the finalizers of every instance of `crd`, in all namespaces; returns how many."""
    listing = _get(env, crd, "--all-namespaces")
    released = 0
    for item in (listing or {}).get("items", []):
        meta = item["metadata"]
        if not meta.get("finalizers"):
            continue
        where = ["-n", meta["namespace"]] if meta.get("namespace") else []
        env.kubectl("patch", crd, meta["name"], *where, "--type=merge",
                    "-p", '{"metadata":{"finalizers":null}}', check=False)
        released += 1
    return released


def _wait_gone(env: Any, crd: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _get(env, "crd", crd) is not None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {crd} still present after {timeout:.0f}s")
        release_instances(env, crd)  # instances created meanwhile, or a finalizer re-added
        time.sleep(0.5)


def remove_crds(env: Any, timeout: float = 90) -> None:
    for crd in crd_names():
        release_instances(env, crd)
    env.kubectl("delete", "crd", *crd_names(), "--ignore-not-found", "--wait=false", check=False)
    for crd in crd_names():
        _wait_gone(env, crd, timeout)


def install_crds(env: Any, timeout: float = 90) -> None:
    """Applies crds/ (server-side, idempotent) once no CRD of ours is still terminating."""
    names = crd_names()
    present = _get(env, "crd", *names, "--ignore-not-found")  # one kubectl for all: fleets start often
    for current in (present or {}).get("items") or ():
        if current["metadata"].get("deletionTimestamp"):
            _wait_gone(env, current["metadata"]["name"], timeout)
    env.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_DIR))
    env.kubectl("wait", "--for=condition=Established", *(f"crd/{crd}" for crd in names), "--timeout=60s")
