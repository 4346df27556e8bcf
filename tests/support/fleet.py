"""What a fleet test does with three brokers, for either target: Flotilla's BrokerCluster (on the
test kube-apiserver) or a three-node KRaft Apache Kafka (tests/support/kraft_cluster.py), so that
the same test checks itself against Kafka with `--kafka-target=apache`.

Both kinds of cluster inherit Fleet: `brokers` (each a ServerProcess with `node_id`, `bootstrap`,
`log_dirs`, `pid`, `stop()`, `kill9()`, `start()`, `restart()`), `broker(node_id)`, `bootstrap`,
`running()`, `metadata()`, `leaders()`, `leader(topic, partition)`, `wait_leaders()`.

    with fleet_cluster(kafka_target, tmp_path, request, overrides={...}) as cluster: ...
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.support import kafka_wire


class Fleet:
    """The queries shared by both clusters; a subclass sets `self.brokers` and starts them."""

    brokers: list[Any]

    def broker(self, node_id: int) -> Any:
        return next(b for b in self.brokers if b.node_id == node_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers if b.is_running())

    def running(self) -> list[Any]:
        return [b for b in self.brokers if b.is_running()]

    def metadata(self, broker: Any, topics: list[str] | None = None) -> Any:
        with kafka_wire.connect(broker.bootstrap, timeout=5.0) as conn:
            return conn.metadata(topics=topics)

    def leaders(self, topic: str, via: Any | None = None) -> dict[int, int]:
        md = self.metadata(via or self.running()[0], [topic])
        t = md.topics[0]
        return {int(p.partition_index): int(p.leader_id) for p in t.partitions}

    def leader(self, topic: str, partition: int, timeout: float = 30.0) -> Any:
        """The broker that leads `partition` of `topic` now (waiting until one does)."""
        leaders = self.wait_leaders(topic, partition + 1, timeout=timeout, at_least=True)
        return self.broker(leaders[partition])

    def wait_leaders(self, topic: str, partitions: int, timeout: float = 30.0,
                     via: Any | None = None, at_least: bool = False) -> dict[int, int]:
        deadline = time.monotonic() + timeout
        last: object = None
        while time.monotonic() < deadline:
            try:
                last = self.leaders(topic, via)
                enough = len(last) >= partitions if at_least else len(last) == partitions
                if enough and all(v >= 0 for v in last.values()):
                    return last
            except Exception as e:
                last = e
            time.sleep(0.25)
        raise AssertionError(f"{topic}: not every partition has a leader after {timeout}s: {last}")


@contextlib.contextmanager
def fleet_cluster(target: str, workdir: Path, request: pytest.FixtureRequest, size: int = 3,
                  overrides: dict[str, str] | None = None,
                  apache_overrides: dict[str, str] | None = None) -> Iterator[Fleet]:
    """A started cluster of `size` brokers of the chosen target. Keys starting `flotilla.` go to
    Flotilla only; `apache_overrides` (Kafka's own names for what a Flotilla key does, such as
    broker.session.timeout.ms for the Lease duration) go to Kafka only. Flotilla's cluster asks
    for the kube_env and kube_namespace fixtures, so the API server starts only for that target."""
    if target == "apache":
        from tests.support.kraft_cluster import ApacheCluster

        settings = {k: v for k, v in (overrides or {}).items() if not k.startswith("flotilla.")}
        settings.update(apache_overrides or {})
        with ApacheCluster(workdir, size=size, overrides=settings) as c:
            yield c
        return
    from tests.support.cluster import BrokerCluster

    kube_env = request.getfixturevalue("kube_env")
    namespace = request.getfixturevalue("kube_namespace")
    with BrokerCluster(workdir, kube_env, namespace, size=size, overrides=overrides) as c:
        yield c
