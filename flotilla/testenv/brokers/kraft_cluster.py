"""A KRaft Apache Kafka cluster of N nodes on loopback, every node broker + controller with a
static quorum: the Apache side of fleet tests (tests/support/fleet.py) and of the fleet
benchmarks (bench/harness/fleets.py).

    with ApacheCluster(tmp_path, size=3, overrides={...}) as c:
        c.bootstrap, c.broker(2).kill9(), c.leader(topic, 0).log_dirs ...
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from flotilla.testenv.brokers.apache_kafka import JVM_OPTS, ApacheKafka
from flotilla.testenv.brokers.broker_process import ServerProcess, free_port
from flotilla.testenv.brokers.fleet import Fleet


class KraftNode(ApacheKafka):
    """One node of the quorum. Not one node is ready before a quorum forms, so `start()` does not
    wait while the cluster starts its nodes (`waiting` False); later restarts of a single node do.

    A restart waits as long as a cluster start (RESTART_TIMEOUT): with three JVMs per test on a
    loaded CI machine a restarted node was seen reach "Kafka Server started" 60 s after launch,
    its log showing steady progress (JVM start, log recovery, raft catch-up, unfencing)."""

    RESTART_TIMEOUT = 180.0

    def __init__(self, workdir: Path, *, node_id: int, voters: str, controller_port: int, size: int,
                 jvm_opts: Sequence[str] | None = None, **kw: object) -> None:
        kw.setdefault("start_timeout", self.RESTART_TIMEOUT)
        super().__init__(workdir, controller_port=controller_port, **kw)  # type: ignore[arg-type]
        self.node_id = node_id
        self.voters = voters
        self.size = size
        self.jvm_opts = list(jvm_opts) if jvm_opts is not None else None
        self.waiting = True

    def settings(self) -> dict[str, str]:
        s = super().settings()
        rf = str(min(3, self.size))
        s.update({"node.id": str(self.node_id), "controller.quorum.voters": self.voters,
                  "offsets.topic.replication.factor": rf, "transaction.state.log.replication.factor": rf,
                  "transaction.state.log.min.isr": str(min(2, self.size)),
                  "share.coordinator.state.topic.replication.factor": rf,
                  "share.coordinator.state.topic.min.isr": str(min(2, self.size))})
        s.update(self.overrides)
        return s

    def command(self) -> list[str]:
        cmd = super().command()
        if self.jvm_opts is None:
            return cmd
        i = cmd.index(JVM_OPTS[0])
        return cmd[:i] + self.jvm_opts + cmd[i + len(JVM_OPTS):]

    def wait_ready(self, timeout: float | None = None) -> None:
        if self.waiting:
            ServerProcess.wait_ready(self, timeout)


class ApacheCluster(Fleet):
    """`size` KRaft nodes, ids 1..size; `overrides` apply to every node (they win over defaults),
    `node_overrides` (node id -> keys) to one each (broker.rack per node), winning over `overrides`."""

    def __init__(self, workdir: Path, size: int = 3, overrides: dict[str, str] | None = None,
                 jvm_opts: Sequence[str] | None = None,
                 node_overrides: dict[int, dict[str, str]] | None = None) -> None:
        self.workdir = Path(workdir)
        ports = {n: free_port() for n in range(1, size + 1)}
        voters = ",".join(f"{n}@127.0.0.1:{p}" for n, p in ports.items())
        self.brokers: list[KraftNode] = [
            KraftNode(self.workdir / f"kafka-{n}", node_id=n, voters=voters, controller_port=ports[n], size=size,
                      jvm_opts=jvm_opts, overrides={**(overrides or {}), **(node_overrides or {}).get(n, {})})
            for n in ports]

    def start(self, timeout: float = 180.0) -> "ApacheCluster":
        for node in self.brokers:
            node.waiting = False
            node.start()
        for node in self.brokers:
            node.waiting = True
            node.wait_ready(timeout)
        self.wait_formed()
        return self

    def wait_formed(self, timeout: float = 120.0) -> None:
        """Until every running node lists every running node (KRaft's Metadata names a random
        live broker as the controller, so unlike Flotilla's there is no controller to agree on)."""
        want = tuple(sorted(b.node_id for b in self.running()))
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            views = {}
            for b in self.running():
                try:
                    views[b.node_id] = tuple(sorted(int(x.node_id) for x in self.metadata(b, []).brokers))
                except Exception as e:
                    views[b.node_id] = repr(e)  # type: ignore[assignment]
            last = views
            if views and all(v == want for v in views.values()):
                return
            time.sleep(0.25)
        raise AssertionError(f"Kafka nodes did not all list {want} within {timeout}s: {last}")
