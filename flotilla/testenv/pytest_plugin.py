"""pytest fixtures over the same code as `flotilla testenv`.

- `kube_env` (session): one control plane per test session in a temporary directory, stopped at
  the end. With FLOTILLA_KUBECONFIG set it uses that cluster instead (e.g. a kind cluster) and starts
  nothing.
- `kube_namespace` (function): a fresh namespace, deleted afterwards without waiting for it to go.
- `kube_node_env` (session): a second control plane with a real node (`up --kubelet`: containerd,
  kubelet, kube-proxy, CoreDNS, local volumes) and the Flotilla image imported; `.image` names it.
  Skipped, saying why, where the node cannot run (not root, or `flotilla testenv build --kubelet`
  / scripts/setup.d/40-node.sh not run).

Missing binaries make `kube_env` fail (not skip), saying to run `flotilla testenv build`.

Before each test that takes `kube_namespace`, every fake node must be Ready (`kube_nodes_ready`).
A test that used a cluster and failed carries in its report what explains it (failure_report.py):
`kubectl get pods,nodes,events -A`, the operator's log lines of the test, and the tails of the
kube-controller-manager, kube-scheduler and kwok/kubelet logs.

Enable with `pytest_plugins = ["flotilla.testenv.pytest_plugin"]` or `-p flotilla.testenv.pytest_plugin`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import build, failure_report, nodes, reaper, versions
from .control_plane import ControlPlane, client_env

EXTERNAL_KUBECONFIG = "FLOTILLA_KUBECONFIG"


class CommandError(subprocess.CalledProcessError):
    """A failed kubectl/helm call whose message includes what the command printed."""

    def __str__(self) -> str:
        return f"{super().__str__()}\nstdout: {self.stdout}\nstderr: {self.stderr}"


@dataclass
class KubeEnv:
    """A running cluster and the tools to talk to it."""

    kubeconfig: Path
    bin_dir: Path
    env: dict[str, str]
    control_plane: ControlPlane | None = None
    #: The Flotilla image imported into the real node (kube_node_env only).
    image: str = ""

    def _tool(self, name: str) -> str:
        candidate = self.bin_dir / name
        return str(candidate) if candidate.is_file() else (shutil.which(name, path=self.env["PATH"]) or name)

    def run(self, tool: str, *args: str, input: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess:
        argv = [self._tool(tool), *args]
        proc = subprocess.run(argv, input=input, capture_output=True, text=True, env=self.env,
                              timeout=timeout)
        if check and proc.returncode != 0:
            raise CommandError(proc.returncode, argv, proc.stdout, proc.stderr)
        return proc

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 120) -> subprocess.CompletedProcess:
        return self.run("kubectl", *args, input=input, check=check, timeout=timeout)

    def helm(self, *args: str, input: str | None = None, check: bool = True,
             timeout: float = 300) -> subprocess.CompletedProcess:
        return self.run("helm", *args, input=input, check=check, timeout=timeout)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "kube: needs the test control plane (kube-apiserver + etcd)")
    config.addinivalue_line("markers", "kube_node: needs the real test node (kubelet + containerd), root")
    failure_report.OPERATOR_LOG.install()
    # Whatever this test process starts is stopped even if it dies before its teardown (Ctrl-C).
    reaper.start()


def pytest_runtest_setup(item: pytest.Item) -> None:
    item._flotilla_operator_log_mark = failure_report.OPERATOR_LOG.mark()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if not report.failed or report.when not in ("setup", "call"):
        return
    envs = [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, (KubeEnv, ControlPlane))]
    for env in envs:
        report.sections.extend(failure_report.cluster_sections(env))
    if envs:
        lines = failure_report.OPERATOR_LOG.since(getattr(item, "_flotilla_operator_log_mark", 0))
        if lines:
            report.sections.append(("operator log (this test)", "\n".join(lines[-150:])))


@pytest.fixture(scope="session")
def kube_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeEnv]:
    bin_dir = versions.bin_dir()
    external = os.environ.get(EXTERNAL_KUBECONFIG)
    if external:
        kubeconfig = Path(external).expanduser().resolve()
        if not kubeconfig.is_file():
            pytest.fail(f"{EXTERNAL_KUBECONFIG}={external}: no such file")
        yield KubeEnv(kubeconfig, bin_dir, client_env(kubeconfig, bin_dir))
        return
    missing = build.missing(bin_dir)
    if missing:
        pytest.fail(
            f"test control plane binaries missing in {bin_dir}: {', '.join(missing)}. "
            "Run `flotilla testenv build` (slow the first time, cached afterwards).",
            pytrace=False,
        )
    cp = ControlPlane(directory=tmp_path_factory.mktemp("testenv"), bin_dir=bin_dir)
    cp.up()
    try:
        yield KubeEnv(cp.kubeconfig, bin_dir, cp.env(), control_plane=cp)
    finally:
        cp.down()


@pytest.fixture(scope="session")
def kube_node_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KubeEnv]:
    from . import dockerfile_image, images, node

    bin_dir = versions.bin_dir()
    missing = node.prerequisites() + build.missing(bin_dir, node=True)
    if missing:
        pytest.skip(f"real test node unavailable: missing {', '.join(missing)} "
                    "(scripts/setup.d/40-node.sh and 45-image.sh set it up)")
    # The image the Dockerfile builds (buildah); seconds when setup.d/45-image.sh has built it.
    try:
        image, tarball = dockerfile_image.build()
    except (dockerfile_image.ImageBuildError, RuntimeError, subprocess.TimeoutExpired) as exc:
        pytest.fail(f"the Flotilla image could not be built from the Dockerfile: {exc}", pytrace=False)
    cp = ControlPlane(directory=tmp_path_factory.mktemp("testenv-node"), bin_dir=bin_dir, node_count=0,
                      kubelet=True, images=[images.build_pause(), tarball])
    cp.up()
    try:
        yield KubeEnv(cp.kubeconfig, bin_dir, cp.env(), control_plane=cp, image=image)
    finally:
        cp.down()


def _namespace_name(test_name: str) -> str:
    """A valid, unique namespace name (DNS label, at most 63 characters) derived from the test."""
    base = re.sub(r"[^a-z0-9-]+", "-", test_name.lower()).strip("-")[:48].strip("-") or "test"
    return f"{base}-{uuid.uuid4().hex[:8]}"


#: How long a test waits for NotReady fake nodes before failing: kwok's node stage marks a node whose
#: Ready is not True Ready again at once, so only a stopped or starved kwok takes this long.
NODES_READY_TIMEOUT = 60.0


@pytest.fixture
def kube_nodes_ready(kube_env: KubeEnv) -> None:
    """Every fake node of our control plane is Ready before the test starts (a test's pods land on
    any of them); fails naming the nodes that are not, and how."""
    cp = kube_env.control_plane
    if cp is None or cp.node_count == 0:
        return
    try:
        nodes.wait_ready(kube_env, cp.node_count, NODES_READY_TIMEOUT)
    except nodes.NodesNotReady as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture
def kube_namespace(kube_env: KubeEnv, kube_nodes_ready: None, request: pytest.FixtureRequest) -> Iterator[str]:
    name = _namespace_name(request.node.name)
    kube_env.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        kube_env.kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found",
                         check=False, timeout=30)
