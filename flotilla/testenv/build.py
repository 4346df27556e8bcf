"""Build (or reuse) the control-plane binaries into ~/.cache/flotilla/testenv/<version>/bin.

Everything comes from the Go module proxy: no prebuilt release binaries are downloaded. A binary is
reused when it exists and its stamp file names the same pin, so a warm cache costs a few stat calls.
Builds run under `nice` with persistent GOMODCACHE and GOCACHE, so a rebuild after a pin change
recompiles only what changed. On a fresh machine the Kubernetes binaries are one `go build` (one
package graph: one binary links while the next compiles), and the tools with modules of their own
(etcd, kwok, helm, coredns) build one after another beside it: their module downloads and the
single-threaded link steps leave cores idle that the other build uses.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import gomod, versions
from .versions import BINARIES, NODE_BINARIES, Binary

HEARTBEAT_SECONDS = 30.0


class BuildError(RuntimeError):
    """The binaries could not be built; the message says what is missing or which step failed."""


def log(message: str) -> None:
    sys.stderr.write(f"[testenv] {message}\n")  # one write: lines of the two build threads do not interleave
    sys.stderr.flush()


# --- what is there -------------------------------------------------------------------------------


def _stamp(bin_dir: Path, binary: Binary) -> Path:
    return bin_dir / f".{binary.name}.pin"


def is_built(bin_dir: Path, binary: Binary) -> bool:
    exe = bin_dir / binary.name
    stamp = _stamp(bin_dir, binary)
    return (
        exe.is_file()
        and os.access(exe, os.X_OK)
        and stamp.is_file()
        and stamp.read_text().strip() == binary.pin
    )


def wanted(node: bool = False) -> tuple[Binary, ...]:
    """The control plane's binaries, plus the real node's when `node`."""
    return BINARIES + NODE_BINARIES if node else BINARIES


def missing(bin_dir: Path | None = None, node: bool = False) -> list[str]:
    """Names of the pinned binaries not (or not at their pinned version) in bin_dir."""
    bin_dir = bin_dir or versions.bin_dir()
    return [b.name for b in wanted(node) if not is_built(bin_dir, b)]


# --- the Go toolchain ----------------------------------------------------------------------------


def find_go() -> str:
    """The `go` command, checked to be new enough; BuildError names what to install otherwise."""
    go = shutil.which("go") or next(
        (p for p in ("/usr/local/go/bin/go", "/usr/lib/go/bin/go") if os.access(p, os.X_OK)), None
    )
    need = ".".join(map(str, versions.MIN_GO))
    if not go:
        raise BuildError(f"go not found on PATH: install Go >= {need} to build the test control plane")
    out = subprocess.run([go, "env", "GOVERSION"], capture_output=True, text=True).stdout.strip()
    m = re.match(r"go(\d+)\.(\d+)", out)
    if not m or (int(m[1]), int(m[2])) < versions.MIN_GO:
        raise BuildError(f"{go} is {out or 'of unknown version'}: install Go >= {need}")
    return go


def go_env(root: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        GOMODCACHE=str(versions.go_mod_cache(root)),
        GOCACHE=str(versions.go_build_cache(root)),
        GOFLAGS="-trimpath",
        # Never fetch another toolchain: the pins build with any Go >= MIN_GO.
        GOTOOLCHAIN="local",
        CGO_ENABLED="0",
    )
    return env


# --- running one step ----------------------------------------------------------------------------


def _run(
    what: str,
    argv: Sequence[str],
    *,
    cwd: Path,
    env: dict[str, str],
    log_file: Path,
) -> str:
    """Run one build command, nice'd, output to log_file; report elapsed time while it runs."""
    if shutil.which("nice"):
        argv = ["nice", "-n", "10", *argv]
    log_file.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(HEARTBEAT_SECONDS):
            log(f"  ... {what}: {time.monotonic() - started:.0f}s")

    ticker = threading.Thread(target=heartbeat, daemon=True)
    ticker.start()
    try:
        with open(log_file, "ab") as out:
            out.write(f"\n$ (cd {cwd} && {' '.join(argv)})\n".encode())
            out.flush()
            proc = subprocess.run(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=out)
    finally:
        done.set()
    if proc.returncode != 0:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-25:])
        raise BuildError(f"{what} failed (exit {proc.returncode}); last lines of {log_file}:\n{tail}")
    return proc.stdout.decode()


def _install(built: Path, bin_dir: Path, binary: Binary) -> None:
    """Move a fresh binary into bin_dir atomically, then write its stamp."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    tmp = bin_dir / f".{binary.name}.tmp"
    shutil.copy2(built, tmp)
    tmp.chmod(0o755)
    os.replace(tmp, bin_dir / binary.name)
    _stamp(bin_dir, binary).write_text(binary.pin + "\n")


def _write_module(moddir: Path, go_mod: str) -> None:
    """Write a generated go.mod unless the same one was written before.

    `go build -mod=mod` adds the indirect requirements to go.mod and fills go.sum; both are kept
    while the generated text (remembered in go.mod.generated) stays the same.
    """
    generated = moddir / "go.mod.generated"
    if generated.exists() and generated.read_text() == go_mod and (moddir / "go.mod").exists():
        return
    (moddir / "go.mod").write_text(go_mod)
    (moddir / "go.sum").unlink(missing_ok=True)
    generated.write_text(go_mod)


# --- the builds ----------------------------------------------------------------------------------


class Builder:
    """Builds the pinned binaries that are missing. `root` is the cache root (tests use a temp dir)."""

    def __init__(self, root: Path | None = None, go: str | None = None) -> None:
        self.root = root or versions.cache_root()
        self.bin_dir = versions.bin_dir(self.root)
        self.src_dir = versions.src_dir(self.root)
        self.log_file = versions.version_dir(self.root) / "build.log"
        self.go = go or find_go()
        self.env = go_env(self.root)

    def run(self, what: str, argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
            log_file: Path | None = None) -> str:
        return _run(what, argv, cwd=cwd, env=env or self.env, log_file=log_file or self.log_file)

    def _timed(self, label: str, step: Callable[[], None]) -> None:
        log(f"building {label} ...")
        started = time.monotonic()
        step()
        log(f"built {label} in {time.monotonic() - started:.0f}s")

    def build_missing(self, node: bool = False) -> Path:
        todo = [b for b in wanted(node) if not is_built(self.bin_dir, b)]
        if not todo:
            log(f"all binaries present in {self.bin_dir}")
            return self.bin_dir
        log(f"building {', '.join(b.name for b in todo)} into {self.bin_dir} (log: {self.log_file})")
        log("the first build downloads modules and compiles Kubernetes: about 15 min on 2 cores")
        total = time.monotonic()
        kube = [b for b in todo if b.name in versions.KUBE_BINARIES + versions.NODE_KUBE_BINARIES]
        tools = [b for b in todo if b.name in self.TOOLS]
        unknown = [b.name for b in todo if b not in kube and b not in tools]
        if unknown:
            raise BuildError(f"no build step for {', '.join(unknown)}")
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="testenv-tools") as beside:
            built = beside.submit(self.build_tools, tools)
            try:
                if kube:
                    self.build_kubernetes(kube)
            finally:
                built.result()  # its BuildError, if any, after the Kubernetes build's
        log(f"done in {time.monotonic() - total:.0f}s: {self.bin_dir}")
        return self.bin_dir

    #: The binaries with Go modules of their own (built beside Kubernetes), and their log.
    TOOLS = ("etcd", "kwok", "helm", "cert-manager", "coredns")

    @property
    def tools_log(self) -> Path:
        return self.log_file.with_name("build-tools.log")

    def build_tools(self, binaries: list[Binary]) -> None:
        steps = {"etcd": (versions.ETCD_VERSION, self.build_etcd), "kwok": (versions.KWOK_VERSION, self.build_kwok),
                 "helm": (versions.HELM_VERSION, self.build_helm), "coredns": (versions.COREDNS_VERSION, self.build_coredns),
                 "cert-manager": (versions.CERT_MANAGER_VERSION, self.build_cert_manager)}
        for b in binaries:
            version, step = steps[b.name]
            self._timed(f"{b.name} {version}", lambda b=b, step=step: step(b))

    def build_kubernetes(self, binaries: list[Binary]) -> None:
        version = versions.KUBERNETES_VERSION
        moddir = self.src_dir / "kubernetes"
        moddir.mkdir(parents=True, exist_ok=True)
        log(f"fetching k8s.io/kubernetes {version} metadata from the module proxy ...")
        info = json.loads(
            self.run("go mod download k8s.io/kubernetes", [self.go, "mod", "download", "-json",
                     f"k8s.io/kubernetes@{version}"], cwd=moddir)
        )
        upstream = Path(info["GoMod"]).read_text()
        _write_module(moddir, gomod.kubernetes_go_mod(upstream, version))
        # The release date, not today's: identical flags keep the link step cached across rebuilds.
        release_time = json.loads(Path(info["Info"]).read_text()).get("Time", "") if info.get("Info") else ""
        ldflags = gomod.kubernetes_ldflags(version, build_date=release_time)
        names = ", ".join(b.name for b in binaries)
        with tempfile.TemporaryDirectory(dir=self.src_dir) as out:
            self._timed(f"{names} {version}", lambda: self.run(
                f"go build {names}", [self.go, "build", "-mod=mod", "-ldflags", ldflags, "-o", out + os.sep,
                                      *(f"k8s.io/kubernetes/cmd/{b.name}" for b in binaries)], cwd=moddir))
            for b in binaries:
                _install(Path(out) / b.name, self.bin_dir, b)

    def build_etcd(self, binary: Binary) -> None:
        moddir = self.src_dir / "etcd"
        moddir.mkdir(parents=True, exist_ok=True)
        _write_module(moddir, gomod.etcd_go_mod(versions.ETCD_VERSION))
        (moddir / "main.go").write_text(gomod.ETCD_MAIN_GO)
        with tempfile.TemporaryDirectory(dir=self.src_dir) as out:
            self.run("go build etcd", [self.go, "build", "-mod=mod", "-ldflags", "-s -w", "-o",
                                       str(Path(out) / "etcd"), "."], cwd=moddir, log_file=self.tools_log)
            _install(Path(out) / "etcd", self.bin_dir, binary)

    def build_cert_manager(self, binary: Binary) -> None:
        """cert-manager's controller (issues Certificates; its webhook is not needed) and its CRDs."""
        v = versions.CERT_MANAGER_VERSION
        moddir = self.src_dir / "cert-manager"
        moddir.mkdir(parents=True, exist_ok=True)
        _write_module(moddir, gomod.cert_manager_go_mod(v))
        (moddir / "tools.go").write_text(gomod.CERT_MANAGER_TOOLS_GO)
        info = json.loads(self.run("go mod download cert-manager", [self.go, "mod", "download", "-json",
                                   f"github.com/cert-manager/cert-manager@{v}"], cwd=moddir, log_file=self.tools_log))
        crds = versions.cert_manager_crds(self.root)
        crds.mkdir(parents=True, exist_ok=True)
        for crd in (Path(info["Dir"]) / "deploy" / "crds").glob("crd-*.yaml"):
            shutil.copy2(crd, crds / crd.name)
            (crds / crd.name).chmod(0o644)
        with tempfile.TemporaryDirectory(dir=self.src_dir) as out:
            self.run("go build cert-manager", [
                self.go, "build", "-mod=mod", "-tags", "tools", "-ldflags",
                f"-s -w -X github.com/cert-manager/cert-manager/pkg/util.AppVersion={v}",
                "-o", str(Path(out) / "cert-manager"), "github.com/cert-manager/cert-manager/cmd/controller"],
                cwd=moddir, log_file=self.tools_log)
            _install(Path(out) / "cert-manager", self.bin_dir, binary)

    def _go_install(self, binary: Binary, package: str, version: str, ldflags: str) -> None:
        self.src_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=self.src_dir) as out:
            self.run(f"go install {package}", [self.go, "install", "-ldflags", ldflags, f"{package}@{version}"],
                     cwd=Path(out), env={**self.env, "GOBIN": out}, log_file=self.tools_log)
            _install(Path(out) / binary.name, self.bin_dir, binary)

    def build_kwok(self, binary: Binary) -> None:
        v = versions.KWOK_VERSION
        self._go_install(binary, "sigs.k8s.io/kwok/cmd/kwok", v,
                         f"-s -w -X sigs.k8s.io/kwok/pkg/consts.Version={v}")

    def build_helm(self, binary: Binary) -> None:
        v = versions.HELM_VERSION
        self._go_install(binary, "helm.sh/helm/v3/cmd/helm", v,
                         f"-s -w -X helm.sh/helm/v3/internal/version.version={v}")


    def build_coredns(self, binary: Binary) -> None:
        v = versions.COREDNS_VERSION
        self._go_install(binary, "github.com/coredns/coredns", v,
                         f"-s -w -X github.com/coredns/coredns/coremain.GitCommit={v}")


def ensure_built(root: Path | None = None, node: bool = False) -> Path:
    """Build whatever is missing and return the bin directory; fast when everything is cached.

    Concurrent callers (a developer's shell and a test run, say) take turns on a lock file; the
    second one then finds the binaries built and returns.
    """
    bin_dir = versions.bin_dir(root)
    if not missing(bin_dir, node):
        return bin_dir
    lock_path = versions.version_dir(root) / "build.lock"
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"another build holds {lock_path}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        return Builder(root).build_missing(node)
