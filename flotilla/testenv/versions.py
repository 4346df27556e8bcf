"""What the test control plane pins, and where its cache lives.

Every binary is built from source fetched through the Go module proxy. The cache is keyed by the
Kubernetes version; each binary also gets a stamp file holding the exact pin it was built from, so
changing any pin here rebuilds only what it affects.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.34.4"
ETCD_VERSION = "v3.5.35"
KWOK_VERSION = "v0.7.0"
HELM_VERSION = "v3.19.5"
#: The issuer behind `spec.certificates.issuerRef` in the tests: the newest release whose controller is
#: in the module the Go proxy serves (from v1.12 on it is a module of its own that is not published).
CERT_MANAGER_VERSION = "v1.11.5"
#: Cluster DNS of the real test node (`flotilla testenv up --kubelet`).
COREDNS_VERSION = "v1.12.4"

#: The oldest Go that builds every pin above (etcd v3.5.35's go.mod says go 1.26.0).
MIN_GO = (1, 26)


def staging_version(kubernetes_version: str = KUBERNETES_VERSION) -> str:
    """k8s.io staging modules (k8s.io/api, ...) are released as v0.Y.Z for Kubernetes v1.Y.Z."""
    major, minor, patch = kubernetes_version.lstrip("v").split(".")
    if major != "1":
        raise ValueError(f"unexpected Kubernetes version {kubernetes_version!r}")
    return f"v0.{minor}.{patch}"


@dataclass(frozen=True)
class Binary:
    """One binary of the control plane: its name in bin/ and the pin it is built from."""

    name: str
    pin: str


KUBE_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
#: The real node's Kubernetes binaries: the same module and version as the API server's.
NODE_KUBE_BINARIES = ("kubelet", "kube-proxy")

BINARIES = (
    *(Binary(name, f"k8s.io/kubernetes@{KUBERNETES_VERSION}") for name in KUBE_BINARIES),
    Binary("etcd", f"go.etcd.io/etcd/server/v3@{ETCD_VERSION}"),
    Binary("kwok", f"sigs.k8s.io/kwok@{KWOK_VERSION}"),
    Binary("helm", f"helm.sh/helm/v3@{HELM_VERSION}"),
    Binary("cert-manager", f"github.com/cert-manager/cert-manager@{CERT_MANAGER_VERSION}"),
)

#: Built only for the real node (`flotilla testenv build --kubelet`, scripts/setup.d/40-node.sh).
NODE_BINARIES = (
    *(Binary(name, f"k8s.io/kubernetes@{KUBERNETES_VERSION}") for name in NODE_KUBE_BINARIES),
    Binary("coredns", f"github.com/coredns/coredns@{COREDNS_VERSION}"),
)


def cache_root() -> Path:
    """~/.cache/flotilla/testenv, honouring XDG_CACHE_HOME and FLOTILLA_TESTENV_CACHE."""
    if env := os.environ.get("FLOTILLA_TESTENV_CACHE"):
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "flotilla" / "testenv"


def version_dir(root: Path | None = None) -> Path:
    return (root or cache_root()) / KUBERNETES_VERSION


def bin_dir(root: Path | None = None) -> Path:
    """Where the built binaries live: ~/.cache/flotilla/testenv/<kubernetes version>/bin."""
    return version_dir(root) / "bin"


def cert_manager_crds(root: Path | None = None) -> Path:
    """cert-manager's CRDs, copied from its module when its controller is built."""
    return version_dir(root) / "cert-manager-crds"


def src_dir(root: Path | None = None) -> Path:
    """Where the generated Go modules live (go.mod, go.sum, a wrapper main for etcd)."""
    return version_dir(root) / "src"


def go_mod_cache(root: Path | None = None) -> Path:
    """Shared by every pinned version, so a version bump re-downloads only what changed."""
    return (root or cache_root()) / "go" / "mod"


def go_build_cache(root: Path | None = None) -> Path:
    return (root or cache_root()) / "go" / "build"


def default_run_dir() -> Path:
    """Where `flotilla testenv up` keeps its state unless told otherwise."""
    return cache_root() / "run"
