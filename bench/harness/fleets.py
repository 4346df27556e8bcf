"""Three brokers each side for the harnesses that need a fleet (acks-all, omb, drain,
cluster-metadata): Flotilla's BrokerCluster on a test control plane of its own, or a three-node
KRaft Apache Kafka with the stock JVM options. Both are `flotilla.testenv.brokers.fleet.Fleet`s
numbering their brokers 1..3, so a command runs the same code against either; each command passes
its own broker settings. Also the replicated topic every fleet case starts from."""

from __future__ import annotations

import contextlib
import datetime
import time
from pathlib import Path
from typing import Any, Iterator

from flotilla.testenv import kafka_wire

REPLICATION_FACTOR = 3
MIN_INSYNC = 2
#: Kafka's default of never fsyncing by message count, stated for both (flushing is left to the OS).
NEVER_FLUSH = {"log.flush.interval.messages": str(2 ** 63 - 1)}


class TargetUnavailable(RuntimeError):
    """This target cannot run the workload here; the message says why."""


@contextlib.contextmanager
def apache_fleet(workdir: Path, overrides: dict[str, str] | None = None) -> Iterator[Any]:
    """Three KRaft nodes (flotilla/testenv/brokers/kraft_cluster.py) with the JVM options of
    kafka-server-start.sh; TargetUnavailable when Kafka's jars are not cached."""
    from bench.harness.targets import KAFKA_STOCK_JVM_OPTS, apache_available
    from flotilla.testenv.brokers.kraft_cluster import ApacheCluster

    ok, why = apache_available(fetch=False)
    if not ok:
        raise TargetUnavailable(why)
    with ApacheCluster(workdir, size=3, overrides=overrides, jvm_opts=KAFKA_STOCK_JVM_OPTS) as cluster:
        yield cluster


@contextlib.contextmanager
def flotilla_fleet(workdir: Path, overrides: dict[str, str] | None = None) -> Iterator[Any]:
    """Three Flotilla brokers (flotilla/testenv/brokers/cluster.py) with their metadata in a
    kube-apiserver started for them in `workdir`/testenv, in namespace `bench`; stopped on exit."""
    from flotilla.testenv import versions
    from flotilla.testenv.brokers.cluster import BrokerCluster
    from flotilla.testenv.control_plane import ControlPlane
    from flotilla.testenv.pytest_plugin import KubeEnv

    cp = ControlPlane(directory=workdir / "testenv", bin_dir=versions.bin_dir())
    cp.up()
    try:
        env = KubeEnv(cp.kubeconfig, cp.bin_dir, cp.env(), control_plane=cp)
        env.kubectl("create", "namespace", "bench")
        with BrokerCluster(workdir / "flotilla", env, "bench", size=3, overrides=overrides) as cluster:
            yield cluster
    finally:
        cp.down()


FLEETS = {"apache": apache_fleet, "flotilla": flotilla_fleet}


def fleet_cpu(cluster: Any) -> float:
    """CPU seconds the running brokers of a fleet have used so far."""
    from bench.harness.targets import cpu_seconds

    return sum(cpu_seconds(b.pid) for b in cluster.running())


# -- the replicated topic ------------------------------------------------------------------------
def create_replicated_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest

    with kafka_wire.connect(bootstrap, timeout=60) as conn:
        resp = conn.request(CreateTopicsRequest(
            topics=(CreatableTopic(
                name=topic, num_partitions=partitions, replication_factor=REPLICATION_FACTOR, assignments=(),
                configs=(CreatableTopicConfig(name="min.insync.replicas", value=str(MIN_INSYNC)),)),),
            timeout=datetime.timedelta(seconds=60), validate_only=False))
    t = resp.topics[0]
    if int(t.error_code) != 0:
        raise TargetUnavailable(f"CreateTopics {topic} (replication factor {REPLICATION_FACTOR}) answered "
                                f"{t.error_code!r}: {t.error_message}")


def wait_in_sync(bootstrap: str, topic: str, partitions: int, timeout: float = 90.0) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, replicas) once every partition has a leader and all its replicas in
    the ISR; TargetUnavailable if that does not happen within `timeout`."""
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        try:
            with kafka_wire.connect(bootstrap, timeout=10) as conn:
                t = conn.metadata([topic]).topics[0]
            parts = {int(p.partition_index): (int(p.leader_id), [int(r) for r in p.replica_nodes],
                                              {int(r) for r in p.isr_nodes}) for p in t.partitions}
            last = {k: (v[0], v[1], sorted(v[2])) for k, v in parts.items()}
            if (int(t.error_code) == 0 and len(parts) == partitions and all(
                    leader >= 0 and len(replicas) == REPLICATION_FACTOR and set(replicas) == isr
                    for leader, replicas, isr in parts.values())):
                return {k: (v[0], v[1]) for k, v in parts.items()}
        except (OSError, EOFError, ValueError, RuntimeError) as e:
            last = e
        time.sleep(0.25)
    raise TargetUnavailable(f"{topic}: not every partition had {REPLICATION_FACTOR} in-sync replicas and a "
                            f"leader within {timeout:.0f}s (last: {last})")
