"""A real node for the test control plane: containerd + runc, CNI, a kubelet and kube-proxy.

Opt-in beside kwok (`flotilla testenv up --kubelet`): pods really run, from images imported into
containerd from local OCI tarballs (never pulled). Everything the node creates lives under
`<state dir>/node/` or is named after the node's bridge, so `down` can remove it all:

    containerd root and state, its socket     node/containerd/
    kubelet root dir, pod logs                node/kubelet/, node/pod-logs/
    CNI configuration and IP allocations      node/cni/
    local PersistentVolume directories        node/volumes/pv-N/

Networking: one Linux bridge (BRIDGE) holding GATEWAY, the node's address. Pods get addresses from
POD_SUBNET on it through Debian's CNI plugins (bridge + host-local + loopback + portmap); there is no
masquerading and no route out, so pods reach only the node and each other. The API server listens
on GATEWAY (so pods can reach it) and kube-proxy turns Service IPs into pod addresses with iptables.

Limits of this machine, found by running it: the sandbox lacks CAP_SYS_RESOURCE, so containerd must
not lower a container's oom_score_adj (restrict_oom_score_adj), and the host uses cgroup v1, which
kubelet v1.34 still runs on with failCgroupV1: false.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Protocol

from .ports import free_port

NODE_NAME = "node-0"
BRIDGE = "flotilla0"
POD_SUBNET = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
CLUSTER_DOMAIN = "cluster.local"
#: Where the node's stand-in cloud gives LoadBalancer Services their addresses (load_balancers.py);
#: routed to the bridge, where kube-proxy turns them into pod addresses.
LOAD_BALANCER_SUBNET = "10.245.0.0/24"
PAUSE_IMAGE = "flotilla.local/pause:1"
#: The kube-dns Service's address; CoreDNS itself runs on the node as a process on GATEWAY:53.
CLUSTER_DNS_IP = "10.0.0.10"
#: The machine-wide lock: one real node at a time (the bridge and its subnet are fixed).
LOCK_FILE = Path("/run/flotilla-testenv-node.lock")
#: How long a second real node waits for the first to go before giving up.
LOCK_TIMEOUT = 900.0
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")
LOCAL_VOLUMES = 16
#: The iptables chain (in FORWARD) that keeps pods' traffic on the bridge.
ISOLATION_CHAIN = "FLOTILLA-NODE"
STORAGE_CLASS = "local"


class NodeError(RuntimeError):
    pass


class Host(Protocol):
    """What the node uses of its control plane (control_plane.py's ControlPlane): its directory,
    binaries and kubeconfig, kubectl, and starting and awaiting the node's processes under it."""

    directory: Path
    bin_dir: Path

    @property
    def kubeconfig(self) -> Path: ...

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess: ...

    def _start(self, name: str, argv: list[str]) -> None: ...

    def _wait(self, what: str, check: Callable[[], bool], timeout: float = ...) -> None: ...


def _run(*argv: str, check: bool = True, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, input=input)


def cni_bin_dir() -> str:
    for d in CNI_BIN_DIRS:
        if (Path(d) / "bridge").exists():
            return d
    raise NodeError(f"no CNI plugins in {' or '.join(CNI_BIN_DIRS)}: apt-get install containernetworking-plugins")


def prerequisites() -> list[str]:
    """What is missing on this machine for a real node (empty when it can run)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (containerd, the kubelet and CNI need it)")
    for exe in ("containerd", "ctr", "runc", "iptables", "ip", "catatonit", "debootstrap", "buildah", "unshare"):
        if not shutil.which(exe):
            missing.append(exe)
    if not any((Path(d) / "bridge").exists() for d in CNI_BIN_DIRS):
        missing.append("containernetworking-plugins")
    return missing


# --- configuration files (pure) --------------------------------------------------------------------


def containerd_config(node_dir: Path, cni_bin: str) -> str:
    d = node_dir / "containerd"
    return f"""version = 2
root = "{d / 'root'}"
state = "{d / 'state'}"
[grpc]
  address = "{d / 'containerd.sock'}"
[ttrpc]
  address = "{d / 'containerd.sock.ttrpc'}"
[plugins."io.containerd.internal.v1.opt"]
  path = "{d / 'opt'}"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # No CAP_SYS_RESOURCE here: runc cannot lower oom_score_adj below containerd's own.
  restrict_oom_score_adj = true
  # Network namespaces under our state dir, not /var/run/netns: `down` finds every one.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{node_dir / 'cni' / 'net.d'}"
"""


def cni_config(node_dir: Path) -> dict:
    return {
        "cniVersion": "0.4.0",
        "name": "flotilla",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_SUBNET, "gateway": GATEWAY}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(node_dir / "cni" / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(node_dir: Path, ca_cert: Path, ports: dict[str, int], cluster_dns: str | None) -> dict:
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # cgroup v1 is in maintenance mode; v1.34 still runs on it when told not to fail.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{node_dir / 'containerd' / 'containerd.sock'}",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca_cert)},
        },
        "authorization": {"mode": "AlwaysAllow"},
        "address": GATEWAY,
        "port": ports["kubelet"],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports["kubelet_healthz"],
        "failSwapOn": False,
        # Pods must not inherit the host's resolvers: nothing outside is reachable anyway.
        "resolvConf": "",
        "clusterDomain": CLUSTER_DOMAIN,
        "podLogsDir": str(node_dir / "pod-logs"),
        # Shared CI disks fill up; evicting pods would make tests flaky, not safer.
        "evictionHard": {"nodefs.available": "1%", "imagefs.available": "1%", "memory.available": "100Mi"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "podCIDR": POD_SUBNET,
        "maxPods": 60,
    }
    if cluster_dns:
        config["clusterDNS"] = [cluster_dns]
    return config


def kube_proxy_config(kubeconfig: Path, ports: dict[str, int]) -> dict:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "clusterCIDR": POD_SUBNET,
        "bindAddress": GATEWAY,
        "healthzBindAddress": f"127.0.0.1:{ports['proxy_healthz']}",
        "metricsBindAddress": f"127.0.0.1:{ports['proxy_metrics']}",
        # Leave the host's conntrack sysctls alone.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
        "nodePortAddresses": [f"{GATEWAY}/32"],
    }


def corefile(kubeconfig: Path, health_port: int) -> str:
    return f""".:53 {{
    bind {GATEWAY}
    errors
    health 127.0.0.1:{health_port}
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {kubeconfig}
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""


def dns_manifests() -> dict:
    """The kube-dns Service (the address pods' resolv.conf names) and its endpoint: CoreDNS on the node."""
    ports = [{"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53, "protocol": "TCP"}]
    return {"apiVersion": "v1", "kind": "List", "items": [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {"name": "kube-dns", "namespace": "kube-system", "labels": {"k8s-app": "kube-dns"}},
         "spec": {"clusterIP": CLUSTER_DNS_IP, "ports": [dict(p, targetPort=53) for p in ports]}},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {"name": "kube-dns-node", "namespace": "kube-system",
                      "labels": {"kubernetes.io/service-name": "kube-dns",
                                 "endpointslice.kubernetes.io/managed-by": "flotilla-testenv"}},
         "addressType": "IPv4",
         "endpoints": [{"addresses": [GATEWAY], "conditions": {"ready": True}}],
         "ports": ports},
    ]}


def storage_manifests(node_dir: Path, count: int = LOCAL_VOLUMES) -> dict:
    """A default StorageClass and `count` static local PersistentVolumes on the node.

    The class binds on first consumer, so a claim is matched with a volume once its pod is
    scheduled (as with a dynamic provisioner). Volumes are Retain'ed: there is no provisioner to
    delete them; the test environment removes their directories with the node.
    """
    items: list[dict] = [{
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS,
                     "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }]
    for i in range(count):
        items.append({
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": f"local-pv-{i}"},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": STORAGE_CLASS,
                "local": {"path": str(node_dir / "volumes" / f"pv-{i}")},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE_NAME]}]}]}},
            },
        })
    return {"apiVersion": "v1", "kind": "List", "items": items}


# --- the node's life --------------------------------------------------------------------------------


class Node:
    """The real node of one control plane; its files under `<cp dir>/node`."""

    def __init__(self, cp: Host) -> None:
        self.cp = cp
        self.dir = cp.directory / "node"
        self._lock = None

    @property
    def socket(self) -> Path:
        return self.dir / "containerd" / "containerd.sock"

    def ctr(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        return _run("ctr", "-a", str(self.socket), "-n", "k8s.io", *args, check=check)

    # network first: the API server binds to GATEWAY, so the bridge must exist before it starts
    def prepare_network(self) -> None:
        missing = prerequisites()
        if missing:
            raise NodeError(f"a real node needs: {', '.join(missing)} (scripts/setup.d/40-node.sh installs them)")
        self._take_the_machine()
        remove_network()  # what a killed run left behind
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "add", f"{GATEWAY}/24", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        # Host-side traffic to Service IPs leaves from the bridge address, not another interface's.
        from .certs import SERVICE_CLUSTER_IP_RANGE
        _run("ip", "route", "replace", SERVICE_CLUSTER_IP_RANGE, "dev", BRIDGE, "src", GATEWAY)
        _run("ip", "route", "replace", LOAD_BALANCER_SUBNET, "dev", BRIDGE, "src", GATEWAY)
        # Service IPs between pods need forwarding (the CNI bridge plugin turns it on anyway); what
        # comes from the bridge may only go back to it: pods never reach another interface.
        _run("sysctl", "-qw", "net.ipv4.ip_forward=1", check=False)
        _run("sysctl", "-qw", "net.bridge.bridge-nf-call-iptables=1", check=False)
        _run("iptables", "-N", ISOLATION_CHAIN)
        _run("iptables", "-A", ISOLATION_CHAIN, "-i", BRIDGE, "!", "-o", BRIDGE, "-j", "DROP")
        _run("iptables", "-I", "FORWARD", "1", "-j", ISOLATION_CHAIN)

    def _take_the_machine(self, timeout: float = LOCK_TIMEOUT) -> None:
        """Wait (a while) for another real node on this machine to go: a test session holds the
        lock for its lifetime; a node started by `flotilla testenv up` shows as a running kubelet."""
        LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
        self._lock = open(LOCK_FILE, "w")
        deadline = time.monotonic() + timeout
        locked = False
        while True:
            if not locked:
                try:
                    fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    locked = True
                except BlockingIOError:
                    pass
            if locked and not running_kubelets():
                return
            if time.monotonic() > deadline:
                what = f"kubelet pids {running_kubelets()}" if locked else f"{LOCK_FILE} is locked"
                raise NodeError(f"another real test node runs on this machine ({what}); stop it with "
                                "`flotilla testenv down --dir <its dir>`")
            time.sleep(2)

    def start(self, images: list[Path]) -> None:
        """containerd, images, kubelet, kube-proxy; then wait for the node to be Ready."""
        cp = self.cp
        for sub in ("containerd", "kubelet", "pod-logs", "cni/net.d", "volumes"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        for i in range(LOCAL_VOLUMES):
            (self.dir / "volumes" / f"pv-{i}").mkdir(exist_ok=True)
        cni_bin = cni_bin_dir()
        (self.dir / "containerd.toml").write_text(containerd_config(self.dir, cni_bin))
        (self.dir / "cni" / "net.d" / "10-flotilla.conflist").write_text(json.dumps(cni_config(self.dir), indent=2))
        cp._start("containerd", ["containerd", "--config", str(self.dir / "containerd.toml")])
        cp._wait("containerd", lambda: self.ctr("version", check=False).returncode == 0, timeout=60)
        for image in images:
            self.ctr("images", "import", str(image))
        ports = {name: free_port() for name in
                 ("kubelet", "kubelet_healthz", "proxy_healthz", "proxy_metrics", "dns_health")}
        ca = cp.directory / "certs" / "ca.crt"
        (self.dir / "Corefile").write_text(corefile(cp.kubeconfig, ports["dns_health"]))
        cp._start("coredns", [str(cp.bin_dir / "coredns"), "-conf", str(self.dir / "Corefile")])
        cp.kubectl("apply", "-f", "-", input=json.dumps(dns_manifests()))
        (self.dir / "kubelet.json").write_text(
            json.dumps(kubelet_config(self.dir, ca, ports, CLUSTER_DNS_IP), indent=2))
        cp._start("kubelet", [
            str(cp.bin_dir / "kubelet"),
            f"--config={self.dir / 'kubelet.json'}",
            f"--kubeconfig={cp.kubeconfig}",
            f"--root-dir={self.dir / 'kubelet'}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={GATEWAY}",
            "--v=1",
        ])
        (self.dir / "kube-proxy.json").write_text(json.dumps(kube_proxy_config(cp.kubeconfig, ports), indent=2))
        cp._start("kube-proxy", [str(cp.bin_dir / "kube-proxy"), f"--config={self.dir / 'kube-proxy.json'}", "--v=1"])
        cp._wait("real node Ready", self.ready, timeout=120)
        cp.kubectl("apply", "-f", "-", input=json.dumps(storage_manifests(self.dir)))

    def ready(self) -> bool:
        out = self.cp.kubectl("get", "node", NODE_NAME, "-o", "json", check=False)
        if out.returncode != 0:
            return False
        conditions = json.loads(out.stdout).get("status", {}).get("conditions", [])
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)

    def clean_runtime(self) -> None:
        """Kill every container and sandbox containerd runs for us (the kubelet is stopped first)."""
        if not self.socket.exists():
            return
        tasks = self.ctr("tasks", "ls", "-q", check=False).stdout.split()
        for task in tasks:
            self.ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
        deadline = time.monotonic() + 10
        for task in tasks:
            while self.ctr("tasks", "delete", task, check=False).returncode != 0 and time.monotonic() < deadline:
                time.sleep(0.2)
        for container in self.ctr("containers", "ls", "-q", check=False).stdout.split():
            self.ctr("containers", "delete", container, check=False)


def running_kubelets() -> list[int]:
    """Pids of kubelets serving our node name (from an earlier `up --kubelet` still running)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith(b"/kubelet") and f"--hostname-override={NODE_NAME}".encode() in argv:
                pids.append(int(entry.name))
    return pids


def remove_network() -> None:
    """Delete the bridge, its routes and what kube-proxy and portmap put in iptables."""
    if _run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        _run("ip", "link", "delete", BRIDGE, check=False)
    for table in ("nat", "filter", "mangle"):
        rules = _run("iptables-save", "-t", table, check=False).stdout
        chains = [line[1:].split()[0] for line in rules.splitlines()
                  if line.startswith(":") and line[1:].split()[0].startswith(("KUBE-", "CNI-", ISOLATION_CHAIN))]
        for line in rules.splitlines():
            if line.startswith("-A ") and any(f" -j {p}" in line for p in ("KUBE-", "CNI-", ISOLATION_CHAIN)):
                parts = shlex.split(line)
                if not parts[1].startswith(("KUBE-", "CNI-", ISOLATION_CHAIN)):
                    _run("iptables", "-t", table, "-D", *parts[1:], check=False)
        for chain in chains:
            _run("iptables", "-t", table, "-F", chain, check=False)
        for chain in chains:
            _run("iptables", "-t", table, "-X", chain, check=False)


def unmount_under(directory: Path) -> None:
    """Unmount everything mounted below directory (deepest first): pod volumes, netns, overlays."""
    mounts = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == str(directory) or point.startswith(str(directory) + "/"):
            mounts.append(point)
    for point in sorted(set(mounts), key=len, reverse=True):
        if _run("umount", point, check=False).returncode != 0:
            _run("umount", "-l", point, check=False)


def remove_cgroups() -> None:
    """Remove the kubelet's (now empty) cgroups in every v1 hierarchy (and v2's unified one)."""
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        top = hierarchy / "kubepods"
        if not top.is_dir():
            continue
        for dirpath, _dirs, _files in sorted(os.walk(top), key=lambda w: len(w[0]), reverse=True):
            try:
                os.rmdir(dirpath)
            except OSError:
                pass


def stop_shims(node_dir: Path) -> None:
    """containerd-shim processes outlive containerd; stop those that belong to our state dir."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"containerd-shim-runc-v2") and \
                any(str(node_dir).encode() in arg for arg in cmdline):
            try:
                os.kill(int(entry.name), 9)
            except ProcessLookupError:
                pass
