"""Start, wait for and stop the test control plane: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler and kwok, all on loopback, with their state under one directory.

Layout of that directory:

    state.json        pids (with start times), ports, the kubeconfig path
    kubeconfig        the admin kubeconfig (client certificate in system:masters)
    certs/            CA, serving and client certificates, service-account key pair
    kubeconfigs/      one kubeconfig per component
    etcd/             etcd's data
    logs/<name>.log   each process's output
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from . import certs, kubeconfig, kwok_stages, node, nodes, processes, reaper
from .processes import ProcessRecord
from .ports import free_port  # re-exported: callers import it from here

STATE_FILE = "state.json"
READY_TIMEOUT = 120.0


class ControlPlaneError(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"[testenv] {message}", file=sys.stderr, flush=True)


def client_env(kubeconfig_path: Path, bin_dir: Path, base: dict[str, str] | None = None) -> dict[str, str]:
    """base (default: os.environ) with KUBECONFIG set and bin_dir first on PATH."""
    env = dict(os.environ if base is None else base)
    env["KUBECONFIG"] = str(kubeconfig_path)
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    return env


@dataclass
class Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int
    scheduler: int
    kwok: int

    @classmethod
    def pick(cls) -> Ports:
        chosen: set[int] = set()
        values = []
        for _ in range(6):
            port = free_port()
            while port in chosen:
                port = free_port()
            chosen.add(port)
            values.append(port)
        return cls(*values)


@dataclass
class ControlPlane:
    """One control plane, its state in `directory`, its binaries in `bin_dir`."""

    directory: Path
    bin_dir: Path
    node_count: int = 2
    #: How long the node controller waits for a node's Lease or status before it marks the node
    #: NotReady (Unknown) and its pods NotReady. Long by default: kwok's heartbeats can lag on a
    #: loaded 2-core machine, and a longer grace period keeps the fake nodes from flapping.
    node_monitor_grace_period: str = "2m"
    #: Also run a real node (containerd + kubelet + kube-proxy + cluster DNS), see node.py.
    kubelet: bool = False
    #: OCI image tarballs to import into the real node's containerd (the pause image first).
    images: list[Path] = field(default_factory=list)
    ports: Ports | None = None
    records: list[ProcessRecord] = field(default_factory=list)
    _children: list[subprocess.Popen] = field(default_factory=list)

    # --- paths ---

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.directory / STATE_FILE

    @property
    def address(self) -> str:
        """Where the API server listens: loopback, or the real node's bridge so pods reach it."""
        return node.GATEWAY if self.kubelet else "127.0.0.1"

    @property
    def server(self) -> str:
        assert self.ports
        return f"https://{self.address}:{self.ports.apiserver}"

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """An environment whose kubectl/helm talk to this control plane."""
        return client_env(self.kubeconfig, self.bin_dir, base)

    # --- state ---

    def save_state(self) -> None:
        assert self.ports
        state = {
            "bin_dir": str(self.bin_dir),
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "ports": self.ports.__dict__,
            "kubelet": self.kubelet,
            "processes": [r.to_json() for r in self.records],
        }
        self.state_file.write_text(json.dumps(state, indent=2) + "\n")

    @classmethod
    def load(cls, directory: Path) -> ControlPlane | None:
        state_file = directory / STATE_FILE
        if not state_file.exists():
            return None
        state = json.loads(state_file.read_text())
        return cls(
            directory=directory,
            bin_dir=Path(state["bin_dir"]),
            ports=Ports(**state["ports"]),
            kubelet=state.get("kubelet", False),
            records=[ProcessRecord(**r) for r in state["processes"]],
        )

    def running(self) -> list[ProcessRecord]:
        return [r for r in self.records if processes.is_running(r.pid, r.start_time or None)]

    # --- starting ---

    def _start(self, name: str, argv: list[str]) -> None:
        log(f"starting {name}")
        proc, record = processes.spawn(name, argv, self.directory / "logs" / f"{name}.log")
        self._children.append(proc)
        self.records.append(record)
        self.save_state()

    def _check_alive(self) -> None:
        for record in self.records:
            if not processes.is_running(record.pid, record.start_time or None):
                tail = "\n".join(Path(record.log).read_text(errors="replace").splitlines()[-20:])
                raise ControlPlaneError(f"{record.name} exited; last lines of {record.log}:\n{tail}")

    def _wait(self, what: str, check, timeout: float = READY_TIMEOUT) -> None:
        started = time.monotonic()
        deadline = started + timeout
        last_error: object = None
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                if check():
                    log(f"{what}: ok after {time.monotonic() - started:.1f}s")
                    return
            except Exception as exc:  # noqa: BLE001 - remembered and reported on timeout
                last_error = exc
            time.sleep(0.25)
        raise ControlPlaneError(f"timed out after {timeout:.0f}s waiting for {what}: {last_error}")

    def _get(self, url: str, context: ssl.SSLContext) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(url, context=context, timeout=5) as resp:
                return resp.status, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(errors="replace")

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(self.bin_dir / "kubectl"), *args], input=input, capture_output=True, text=True,
            env=self.env(), check=check, timeout=timeout,
        )

    def up(self) -> Path:
        """Start everything, wait until it works, return the admin kubeconfig path."""
        reaper.watch_control_plane(self.directory)   # stopped for us if this process dies first
        needed = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl"]
        if self.kubelet:
            needed += ["kubelet", "kube-proxy", "coredns"]
        missing = [n for n in needed if not (self.bin_dir / n).is_file()]
        if missing:
            raise ControlPlaneError(
                f"missing binaries in {self.bin_dir}: {', '.join(missing)}; run `flotilla testenv build`"
            )
        started = time.monotonic()
        self.directory.mkdir(parents=True, exist_ok=True)
        for stale in ("etcd", "logs", "certs", "kubeconfigs", "node"):
            shutil.rmtree(self.directory / stale, ignore_errors=True)
        self.ports = ports = Ports.pick()
        self.records = []
        self._node = node.Node(self) if self.kubelet else None
        if self._node:
            self._node.prepare_network()
        paths = self._paths = certs.generate(self.directory / "certs",
                                             extra_ips=(node.GATEWAY,) if self.kubelet else ())
        kubeconfig.write(self.kubeconfig, kubeconfig.render(
            self.server, paths.ca_cert, paths.client_cert("admin"), paths.client_key("admin"),
            user="admin"))
        component_kc = {}
        for name in ("controller-manager", "scheduler"):
            component_kc[name] = kubeconfig.write(
                self.directory / "kubeconfigs" / f"{name}.kubeconfig",
                kubeconfig.render(self.server, paths.ca_cert, paths.client_cert(name),
                                  paths.client_key(name), user=name))
        try:
            self._start_etcd(ports)
            self._start_apiserver(ports, paths)
            self._wait_apiserver(paths)
            self._start_controller_manager(ports, paths, component_kc["controller-manager"])
            self._start_scheduler(ports, component_kc["scheduler"])
            self._start_kwok(ports)
            self._wait_components()
            nodes.create(self, self.node_count)
            self._wait("fake nodes Ready", lambda: nodes.all_ready(self, self.node_count))
            if self._node:
                self._node.start(self.images)
        except BaseException:
            log("start failed; stopping what was started")
            self.down()
            raise
        log(f"control plane up in {time.monotonic() - started:.1f}s at {self.server}")
        return self.kubeconfig

    def _start_etcd(self, ports: Ports) -> None:
        client = f"http://127.0.0.1:{ports.etcd_client}"
        peer = f"http://127.0.0.1:{ports.etcd_peer}"
        self._start("etcd", [
            str(self.bin_dir / "etcd"),
            "--name=testenv",
            f"--data-dir={self.directory / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=testenv={peer}",
            "--initial-cluster-state=new",
            # A test cluster does not need durability; fsync is the slow part of etcd on CI disks.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ])

    def _start_apiserver(self, ports: Ports, paths: certs.CertPaths) -> None:
        self._start("kube-apiserver", [
            str(self.bin_dir / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
            f"--bind-address={self.address}",
            f"--advertise-address={self.address}",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={self.directory / 'certs' / 'apiserver'}",
            f"--tls-cert-file={paths.serving_cert}",
            f"--tls-private-key-file={paths.serving_key}",
            f"--client-ca-file={paths.ca_cert}",
            f"--service-account-key-file={paths.sa_pub}",
            f"--service-account-signing-key-file={paths.sa_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-cluster-ip-range={certs.SERVICE_CLUSTER_IP_RANGE}",
            # Front-proxy (aggregation layer) settings: without them the API server and every
            # component log a missing requestheader CA, and aggregated APIs could not be tested.
            f"--requestheader-client-ca-file={paths.ca_cert}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={paths.client_cert('front-proxy-client')}",
            f"--proxy-client-key-file={paths.client_key('front-proxy-client')}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            # Logs, exec and port-forward reach the real node's kubelet by its address, as admin.
            "--kubelet-preferred-address-types=InternalIP",
            f"--kubelet-client-certificate={paths.client_cert('admin')}",
            f"--kubelet-client-key={paths.client_key('admin')}",
            # Without a real node the `kubernetes` Service's Endpoints would point at a loopback
            # address, which validation rejects; nothing in a kwok cluster dials it anyway.
            f"--endpoint-reconciler-type={'lease' if self.kubelet else 'none'}",
            "--v=1",
        ])

    def stop_apiserver(self) -> None:
        """Stop the kube-apiserver process alone (etcd and the rest keep running): an API
        server outage, for tests of what clients of the API do meanwhile."""
        record = next(r for r in self.records if r.name == "kube-apiserver")
        processes.stop(record)
        self.records.remove(record)
        self.save_state()

    def pause(self, name: str) -> None:
        """SIGSTOP one component (e.g. kwok: its nodes' Leases and statuses stop, as when it is
        starved of CPU); `resume` continues it."""
        self._signal(name, signal.SIGSTOP)

    def resume(self, name: str) -> None:
        self._signal(name, signal.SIGCONT)

    def _signal(self, name: str, sig: int) -> None:
        record = next(r for r in self.records if r.name == name)
        if not processes.is_running(record.pid, record.start_time or None):
            raise ControlPlaneError(f"{name} is not running")
        os.kill(record.pid, sig)

    def start_apiserver(self) -> None:
        """Start the kube-apiserver again on the same port and certificates; wait until ready."""
        self._start_apiserver(self.ports, self._paths)
        self._wait_apiserver(self._paths)

    def _client_context(self, paths: certs.CertPaths) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(paths.ca_cert))
        ctx.load_cert_chain(str(paths.client_cert("admin")), str(paths.client_key("admin")))
        return ctx

    def _wait_apiserver(self, paths: certs.CertPaths) -> None:
        ctx = self._client_context(paths)
        self._wait("kube-apiserver /readyz", lambda: self._get(f"{self.server}/readyz", ctx)[0] == 200)

    def _start_controller_manager(self, ports: Ports, paths: certs.CertPaths, kc: Path) -> None:
        self._start("kube-controller-manager", [
            str(self.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            f"--cert-dir={self.directory / 'certs' / 'controller-manager'}",
            f"--service-account-private-key-file={paths.sa_key}",
            f"--root-ca-file={paths.ca_cert}",
            f"--cluster-signing-cert-file={paths.ca_cert}",
            f"--cluster-signing-key-file={paths.ca_key}",
            "--use-service-account-credentials=true",
            # Longer than kwok's Lease renewal interval (kwok_stages.NODE_LEASE_DURATION_SECONDS / 4).
            f"--node-monitor-grace-period={self.node_monitor_grace_period}",
            "--leader-elect=false",
            "--controllers=*",
            "--v=1",
        ])

    def _start_scheduler(self, ports: Ports, kc: Path) -> None:
        self._start("kube-scheduler", [
            str(self.bin_dir / "kube-scheduler"),
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            f"--cert-dir={self.directory / 'certs' / 'scheduler'}",
            "--leader-elect=false",
            "--v=1",
        ])

    def _start_kwok(self, ports: Ports) -> None:
        # Our own configuration, so a ~/.kwok/kwok.yaml cannot change behaviour: kwok's built-in node
        # stages, and our pod stages, which also bring pods back to Ready after their node was
        # NotReady for a while (kwok_stages.py).
        config = self.directory / "kwok.yaml"
        config.write_text(kwok_stages.config())
        self._start("kwok", [
            str(self.bin_dir / "kwok"),
            f"--config={config}",
            f"--kubeconfig={self.kubeconfig}",
            f"--manage-nodes-with-annotation-selector={nodes.KWOK_ANNOTATION}={nodes.KWOK_VALUE}",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.240.0.1",
            f"--server-address=127.0.0.1:{ports.kwok}",
        ])

    def _wait_components(self) -> None:
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        assert self.ports
        for name, port in (("kube-controller-manager", self.ports.controller_manager),
                           ("kube-scheduler", self.ports.scheduler)):
            url = f"https://127.0.0.1:{port}/healthz"
            self._wait(f"{name} /healthz", lambda url=url: self._get(url, insecure)[0] == 200)
        # The service-account controller creating `default` shows the controller-manager works.
        self._wait("default service account",
                   lambda: self.kubectl("get", "serviceaccount", "default", "-n", "default",
                                        check=False).returncode == 0)

    # --- stopping ---

    def down(self) -> list[str]:
        """Stop every recorded process (last started first); return the names that were running.

        With a real node: the kubelet and kube-proxy stop first, then every container is killed
        while containerd still runs, and after everything is stopped the node's mounts, network
        and cgroups are removed."""
        stopped = []
        if self.kubelet:
            for record in [r for r in reversed(self.records) if r.name in ("kube-proxy", "kubelet")]:
                if processes.stop(record):
                    stopped.append(record.name)
            node.Node(self).clean_runtime()
        for record in reversed(self.records):
            if record.name in stopped:
                continue
            if processes.stop(record):
                stopped.append(record.name)
        for child in self._children:
            try:
                child.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        if self.kubelet:
            node_dir = self.directory / "node"
            node.stop_shims(node_dir)
            node.unmount_under(node_dir)
            node.remove_network()
            node.remove_cgroups()
        left = self.running()
        if left:
            raise ControlPlaneError(f"still running: {', '.join(f'{r.name}({r.pid})' for r in left)}")
        self.records = []
        self.state_file.unlink(missing_ok=True)
        return stopped
