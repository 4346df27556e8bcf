"""cert-manager beside the test control plane: its CRDs and its controller (built from source by
build.py, like every other binary), for tests of `spec.certificates.issuerRef`.

The controller runs as a process against the API server with the admin kubeconfig, as it would
run in a cluster with its own ServiceAccount; its webhook (defaulting and validation) is not run,
so resources given to it must be complete. Its log is kept beside the control plane's for failures.
"""

from __future__ import annotations

import contextlib
import subprocess
from pathlib import Path
from typing import Any, Iterator

import yaml

from . import processes, versions
from .ports import free_port


def crd_documents(root: Path | None = None) -> list[dict[str, Any]]:
    """cert-manager's CRDs as shipped in its module, without the Helm template labels they carry."""
    docs = []
    for path in sorted(versions.cert_manager_crds(root).glob("crd-*.yaml")):
        crd = yaml.safe_load(path.read_text())
        crd["metadata"].pop("labels", None)
        docs.append(crd)
    if not docs:
        raise FileNotFoundError(f"no cert-manager CRDs in {versions.cert_manager_crds(root)}: run `flotilla testenv build`")
    return docs


def install_crds(kubectl: Any) -> None:
    """Apply the CRDs and wait until the API server serves them (KubeEnv.kubectl)."""
    docs = crd_documents()
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs), timeout=120)
    kubectl("wait", "--for=condition=Established", "--timeout=60s",
            *(f"crd/{d['metadata']['name']}" for d in docs), timeout=90)


@contextlib.contextmanager
def running(kubeconfig: Path, log_path: Path, bin_dir: Path | None = None) -> Iterator[Path]:
    """The controller, for the `with` block; yields its log's path."""
    binary = (bin_dir or versions.bin_dir()) / "cert-manager"
    argv = [str(binary), f"--kubeconfig={kubeconfig}", "--leader-elect=false",
            f"--metrics-listen-address=127.0.0.1:{free_port()}", "--cluster-resource-namespace=default",
            "--controllers=*,-ingress-shim,-gateway-shim", "-v=2"]
    proc, record = processes.spawn("cert-manager", argv, log_path)
    try:
        yield log_path
    finally:
        processes.stop(record)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
