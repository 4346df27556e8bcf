"""What is done with three brokers, whichever they are: Flotilla's BrokerCluster (cluster.py, on a
test kube-apiserver) or a three-node KRaft Apache Kafka (kraft_cluster.py). One base class, so that a
fleet test (tests/support/fleet.py `fleet_cluster`) or a fleet benchmark (bench/harness/fleets.py)
runs the same code against both.

Both kinds of cluster inherit Fleet: `brokers` (each a ServerProcess with `node_id`, `bootstrap`,
`log_dirs`, `pid`, `stop()`, `kill9()`, `start()`, `restart()`), `broker(node_id)`, `bootstrap`,
`running()`, `metadata()`, `leaders()`, `leader(topic, partition)`, `wait_leaders()`.
"""

from __future__ import annotations

import time
from typing import Any, Self

from flotilla.testenv import kafka_wire


class Fleet:
    """The queries and the lifecycle shared by both clusters; a subclass sets `self.brokers` and
    says how they start (`start()`, returning the started fleet)."""

    brokers: list[Any]

    def start(self) -> Self:
        raise NotImplementedError

    def close(self) -> None:
        for b in self.brokers:
            b.close()

    def __enter__(self) -> Self:
        """Started; a start that fails part-way closes the brokers it had started."""
        try:
            return self.start()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

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
