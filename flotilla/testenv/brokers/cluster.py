"""N Flotilla broker processes on loopback forming one cluster, with their metadata in the test
API server (the `kube_env` fixture's kube-apiserver + etcd).

Each broker gets its own ports and data directory and the same `cluster.id`, cluster name and
namespace; `flotilla.metadata.store=kubernetes` and KUBECONFIG point it at the API server, as a
broker outside a pod would run. The CRDs of crds/ are applied first (KafkaTopic among them).

    cluster = BrokerCluster(tmp_path, kube_env, namespace, size=3).start()
    cluster.brokers[0].bootstrap, cluster.controller_id(), cluster.kill9(node_id) ...
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from flotilla.testenv.brokers.broker_process import FlotillaBroker, free_port
from flotilla.testenv.brokers.crds import install_crds
from flotilla.testenv.brokers.fleet import Fleet

REPO_ROOT = Path(__file__).resolve().parents[3]
CRD_DIR = REPO_ROOT / "crds"
# Short Leases so that failover tests take seconds; the behaviour is the same as with defaults.
LEASE_SETTINGS = {
    "flotilla.metadata.lease.duration.ms": "6000",
}


def apply_crds(kube_env: Any) -> None:
    install_crds(kube_env)


class ClusterBroker(FlotillaBroker):
    """A broker of a BrokerCluster: Kubernetes metadata through the test kubeconfig."""

    def __init__(self, workdir: Path, *, kubeconfig: Path, node_id: int, **kw: Any) -> None:
        super().__init__(workdir, **kw)
        self.kubeconfig = kubeconfig
        self.node_id = node_id

    def settings(self) -> dict[str, str]:
        s = super().settings()
        s["node.id"] = str(self.node_id)
        s.update(self.overrides)  # overrides win over the base defaults, node.id included
        return s

    def env(self) -> dict[str, str]:
        env = super().env()
        env["KUBECONFIG"] = str(self.kubeconfig)
        return env


class BrokerCluster(Fleet):
    def __init__(self, workdir: Path, kube_env: Any, namespace: str, size: int = 3,
                 name: str = "fleet", overrides: dict[str, str] | None = None,
                 node_overrides: dict[int, dict[str, str]] | None = None) -> None:
        """`overrides` apply to every broker, `node_overrides` (node id -> keys) to one each
        (broker.rack per broker), winning over `overrides`."""
        self.workdir = Path(workdir)
        self.kube_env = kube_env
        self.namespace = namespace
        self.name = name
        self.cluster_id = uuid.uuid4().hex[:22]
        common = {
            "cluster.id": self.cluster_id,
            "flotilla.metadata.store": "kubernetes",
            "flotilla.cluster.name": name,
            "flotilla.kubernetes.namespace": namespace,
            "num.partitions": "3",
            "offsets.topic.num.partitions": "12",
            "group.initial.rebalance.delay.ms": "0",
            **LEASE_SETTINGS,
            **(overrides or {}),
        }
        self.brokers: list[ClusterBroker] = [
            ClusterBroker(self.workdir / f"broker-{n}", kubeconfig=kube_env.kubeconfig, node_id=n,
                          port=free_port(), overrides={**common, **(node_overrides or {}).get(n, {})})
            for n in range(1, size + 1)]

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> "BrokerCluster":
        apply_crds(self.kube_env)
        for b in self.brokers:
            b.launch()
        try:
            for b in self.brokers:
                b.wait_ready()
        except BaseException:
            for b in self.brokers:
                b.kill9()
            raise
        self.wait_formed()
        return self

    # -- what the brokers say ----------------------------------------------------------------
    def views(self) -> dict[int, tuple[tuple[int, ...], int]]:
        """Per running broker: (broker ids it lists, controller id it names)."""
        out = {}
        for b in self.running():
            try:
                md = self.metadata(b, [])
            except Exception:
                continue
            out[b.node_id] = (tuple(sorted(int(x.node_id) for x in md.brokers)), int(md.controller_id))
        return out

    def wait_formed(self, timeout: float = 60.0, expect: list[int] | None = None) -> int:
        """Wait until every running broker lists the same live brokers and the same controller;
        returns the controller id."""
        expect_ids = tuple(sorted(expect if expect is not None else [b.node_id for b in self.running()]))
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            views = self.views()
            last = views
            running = {b.node_id for b in self.running()}
            if set(views) == running and views:
                answers = set(views.values())
                if len(answers) == 1:
                    ids, controller = answers.pop()
                    if ids == expect_ids and controller in expect_ids:
                        return controller
            time.sleep(0.25)
        raise AssertionError(f"brokers did not agree on {expect_ids} and one controller within {timeout}s: {last}")

    def controller_id(self) -> int:
        return self.wait_formed()
