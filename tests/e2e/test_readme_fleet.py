"""The README's "Several brokers, one cluster" commands, run as written: three brokers started by
hand with one shared cluster.id form one cluster (issue 22: a new user's second broker used to exit
with "belongs to another cluster", each broker having made up its own id).

The block's first line (`flotilla testenv up`) is what the kube_env fixture already did; the test
runs the rest with that API server's KUBECONFIG, in its own namespace and on ports of its own
(the README's 9091-9093 and 9401-9403 are replaced by free ones).
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from flotilla.testenv.brokers.broker_process import free_port
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.flotilla_only("a Flotilla fleet started by hand")

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"


def readme_block() -> str:
    text = README.read_text()
    section = text.split("### Several brokers, one cluster", 1)[1]
    match = re.search(r"```sh\n(.*?)```", section, re.S)
    assert match, "README: no sh block under 'Several brokers, one cluster'"
    return match.group(1)


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def consecutive_free_ports(count: int, taken: range = range(0)) -> int:
    """A base port b such that b+1 .. b+count are free now (the README adds the broker id)."""
    for _ in range(200):
        base = free_port()
        wanted = range(base + 1, base + 1 + count)
        if wanted.stop < 65536 and not set(wanted) & set(taken) and all(_free(p) for p in wanted):
            return base
    raise RuntimeError("no run of free ports")


def as_test_runs_it(block: str, namespace: str, kafka_base: int, metrics_base: int) -> str:
    lines = block.splitlines()
    assert lines[0].startswith('eval "$(flotilla testenv up)"'), lines[0]
    script = "\n".join(lines[1:])
    for old, new in (("namespace=default", f"namespace={namespace}"), ("9090 + id", f"{kafka_base} + id"),
                     ("9400 + id", f"{metrics_base} + id")):
        assert old in script, f"README block no longer has {old!r}: update this test with it"
        script = script.replace(old, new)
    # Remember what the block started, for the checks and the clean-up.
    return "set -e\n" + script + '\necho "$CLUSTER_ID" > cluster-id\njobs -p > pids\n'


@pytest.mark.timeout(240)
def test_three_brokers_started_as_the_readme_says_form_one_cluster(kube_env, kube_namespace, tmp_path):
    (tmp_path / "crds").symlink_to(REPO / "crds")
    kafka_base = consecutive_free_ports(3)
    metrics_base = consecutive_free_ports(3, taken=range(kafka_base + 1, kafka_base + 4))
    env = dict(kube_env.env, KUBECONFIG=str(kube_env.kubeconfig))
    env["PATH"] = f"{REPO / '.venv' / 'bin'}{os.pathsep}{env['PATH']}"
    script = as_test_runs_it(readme_block(), kube_namespace, kafka_base, metrics_base)
    subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, check=True, timeout=60)
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    logs = {n: tmp_path / f"broker-{n}.log" for n in (1, 2, 3)}
    bootstrap = ",".join(f"127.0.0.1:{kafka_base + n}" for n in (1, 2, 3))
    try:
        assert len(pids) == 3, f"the README's loop started {len(pids)} processes"
        cluster_id = (tmp_path / "cluster-id").read_text().strip()
        admin = AdminClient({"bootstrap.servers": bootstrap})

        def brokers() -> object:
            for n, log in logs.items():
                text = log.read_text(errors="replace") if log.exists() else ""
                assert "belongs to another cluster" not in text, f"broker {n} refused:\n{text[-2000:]}"
            md = admin.list_topics(timeout=5)
            return sorted(md.brokers), md.cluster_id

        assert wait_for("three brokers in one cluster", brokers, timeout=120,
                        until=lambda got: got[0] == [1, 2, 3]) == ([1, 2, 3], cluster_id)

        topic = "readme-fleet"
        admin.create_topics([NewTopic(topic, 3, 3)])[topic].result(60)
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
        for i in range(30):
            producer.produce(topic, key=str(i).encode(), value=b"v%d" % i)
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "readme", "auto.offset.reset": "earliest"})
        consumer.subscribe([topic])
        got: set[bytes] = set()

        def read() -> int:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                got.add(msg.value())
            return len(got)

        try:
            wait_for("the 30 records back from the fleet", read, timeout=90, interval=0, until=lambda n: n == 30)
        finally:
            consumer.close()
    except BaseException:
        for n, log in logs.items():
            text = log.read_text(errors="replace") if log.exists() else "(no log)"
            print(f"--- broker-{n}.log (last 3000 chars) ---\n{text[-3000:]}")
        raise
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for pid in pids:
            wait_for(f"broker pid {pid} to exit", lambda pid=pid: not Path(f"/proc/{pid}").exists()
                     or "zombie" in Path(f"/proc/{pid}/status").read_text().lower() or None, timeout=60)
