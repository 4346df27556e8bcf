"""Starting and stopping brokers of a fleet when things around them are not well (issue 18, items
11 and 12): a broker started while the API server is down waits for it instead of exiting, and
SIGTERM (to one broker or to all at once) ends in a bounded, clean stop.

    pytest -m kube tests/e2e/test_fleet_lifecycle.py
"""

from __future__ import annotations

import signal
import subprocess
import urllib.error
import urllib.request

import pytest

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.cluster import BrokerCluster, ClusterBroker
from flotilla.testenv.waiting import wait_for

pytestmark = [
    pytest.mark.kube,
    pytest.mark.flotilla_only("a Flotilla cluster on Kubernetes metadata"),
]


@pytest.fixture
def cluster(tmp_path, kube_env, kube_namespace):
    with BrokerCluster(tmp_path, kube_env, kube_namespace, size=3) as c:
        yield c


def http_status(url: str) -> int | str:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError as e:
        return f"unreachable: {e}"


def probe(broker: ClusterBroker, path: str) -> int | str:
    return http_status(f"http://127.0.0.1:{broker.metrics_port}{path}")


def launch(broker: ClusterBroker) -> None:
    """Start the broker's process without waiting for it to be ready (it cannot be, yet)."""
    broker.prepare()
    with open(broker.log_path, "ab") as log:
        log.write(b"\n==== start without waiting\n")
        log.flush()
        broker.proc = subprocess.Popen(broker.command(), stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL, cwd=broker.workdir, env=broker.env(),
                                       start_new_session=True)
    broker.starts += 1


def waiting_attempts(broker: ClusterBroker) -> int:
    return broker.log_text().count("metadata store unavailable (attempt")


def still_waiting(broker: ClusterBroker, attempts: int):
    """True once the broker logged `attempts` failed attempts; its exit code if it exited first."""
    if not broker.is_running():
        return f"exited with {broker.proc.returncode if broker.proc else None}: {broker.log_tail(15)}"
    return waiting_attempts(broker) >= attempts


def create_topic(broker: ClusterBroker, partitions: int, rf: int = 3) -> str:
    topic = kafka_wire.unique_topic("life")
    with kafka_wire.connect(broker.bootstrap) as conn:
        code = conn.create_topic(topic, partitions, replication_factor=rf)
    assert int(code) == 0, f"CreateTopics {topic}: {code!r}"
    return topic


# -- item 11: start while the API server is unreachable -------------------------------------------

@pytest.mark.timeout(300)
def test_a_broker_started_during_an_api_server_outage_waits_then_joins_and_serves(cluster, kube_env):
    cp = kube_env.control_plane
    if cp is None:
        pytest.skip("needs the test control plane's own kube-apiserver process")
    topic = create_topic(cluster.brokers[0], 3)
    cluster.wait_leaders(topic, 3)
    late = cluster.brokers[2]
    late.stop()
    cp.stop_apiserver()
    try:
        launch(late)
        # Three failed attempts span more than the old 11 s (registration) and 30 s (first list)
        # after which the broker gave up with a traceback.
        outcome = wait_for("the broker to keep waiting for the API server through 3 attempts",
                           lambda: still_waiting(late, 3), timeout=120, interval=1)
        assert outcome is True, outcome
        assert probe(late, "/healthz") == 200  # alive: a liveness probe must not restart it
        assert probe(late, "/readyz") == 503
    finally:
        cp.start_apiserver()
    late.wait_ready(timeout=120)
    cluster.wait_formed(timeout=60)
    wait_for("the late broker ready (registered, in every ISR)", lambda: probe(late, "/readyz") == 200,
             timeout=90)
    with kafka_wire.connect(late.bootstrap) as conn:
        md = conn.metadata(topics=[topic])
    assert sorted(int(b.node_id) for b in md.brokers) == [1, 2, 3]
    assert "Traceback" not in late.log_text()


@pytest.mark.timeout(240)
def test_sigterm_while_waiting_for_the_api_server_stops_cleanly(cluster, kube_env):
    cp = kube_env.control_plane
    if cp is None:
        pytest.skip("needs the test control plane's own kube-apiserver process")
    late = cluster.brokers[2]
    late.stop()
    cp.stop_apiserver()
    try:
        launch(late)
        outcome = wait_for("the broker waiting for the API server", lambda: still_waiting(late, 1),
                           timeout=60, interval=0.5)
        assert outcome is True, outcome
        late.proc.send_signal(signal.SIGTERM)
        code = late.proc.wait(30)
    finally:
        cp.start_apiserver()
    assert code == 0, late.log_tail(20)
    assert "stop requested while starting" in late.log_text()
    assert "Traceback" not in late.log_text()


# -- item 12: bounded, clean stops and controlled shutdown ----------------------------------------

def current_start(broker: ClusterBroker) -> str:
    """The broker's log since its latest start."""
    text = broker.log_text()
    return text[text.rfind("\n==== start"):]


def acks_all_producer(bootstrap: str):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                     "message.timeout.ms": 60000, "request.timeout.ms": 15000, "retry.backoff.ms": 100,
                     "topic.metadata.refresh.interval.ms": 1000, "linger.ms": 5})


def produce_acked(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    p = acks_all_producer(bootstrap)
    failed = []
    for i in range(n):
        p.produce(topic, partition=i % partitions, value=b"x%d" % i,
                  on_delivery=lambda err, msg: failed.append(err) if err is not None else None)
    assert p.flush(60) == 0 and failed == [], failed


@pytest.mark.timeout(300)
def test_sigterm_to_every_broker_at_once_all_exit_cleanly_and_a_restart_recovers_nothing(cluster):
    topic = create_topic(cluster.brokers[0], 6)
    cluster.wait_leaders(topic, 6)
    produce_acked(cluster.bootstrap, topic, 300, 6)
    procs = {b.node_id: b.proc for b in cluster.brokers}
    for proc in procs.values():
        proc.send_signal(signal.SIGTERM)
    codes = {}
    for node, proc in procs.items():
        try:
            codes[node] = proc.wait(30)  # the bound: every broker gone within 30 s
        except subprocess.TimeoutExpired:
            codes[node] = "still running 30 s after SIGTERM"
    logs = {b.node_id: current_start(b)[-3000:] for b in cluster.brokers}
    assert codes == {1: 0, 2: 0, 3: 0}, (codes, logs)
    for b in cluster.brokers:
        b.proc = None
        assert (b.data_dir / ".kafka_cleanshutdown").exists(), logs[b.node_id]
        assert "Traceback" not in b.log_text()
    for b in cluster.brokers:
        b.start()
    cluster.wait_formed()
    for b in cluster.brokers:
        started = current_start(b)
        assert "after a clean shutdown" in started, started[-3000:]
        assert "recovering" not in started, started[-3000:]


@pytest.mark.timeout(300)
def test_sigterm_to_one_broker_hands_its_leaderships_over_before_it_exits(cluster):
    import threading

    topic = create_topic(cluster.brokers[0], 6)
    leaders = cluster.wait_leaders(topic, 6)
    stopping = cluster.brokers[0]
    led = sorted(p for p, node in leaders.items() if node == stopping.node_id)
    assert led, leaders
    survivors = [b for b in cluster.brokers if b is not stopping]
    bootstrap = ",".join(b.bootstrap for b in survivors)
    p = acks_all_producer(bootstrap)
    acked, failed = [], []
    done = threading.Event()

    def produce() -> None:
        i = 0
        while not done.is_set():
            p.produce(topic, partition=i % 6, value=b"v%d" % i,
                      on_delivery=lambda err, msg: (failed if err is not None else acked).append(err or msg.offset()))
            p.poll(0.005)
            i += 1

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_for("records acknowledged before the stop", lambda: len(acked) >= 100, timeout=60)
        proc = stopping.proc
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(60)
        stopping.proc = None
        wait_for("records acknowledged after the stop", lambda: len(acked) >= 600, timeout=60)
    finally:
        done.set()
        writer.join()
    assert p.flush(60) == 0
    assert failed == []
    assert code == 0
    log = current_start(stopping)
    before_close = log[:log.find("shutting down: closing listeners")]
    assert "shutting down: closing listeners" in log, log[-3000:]
    # Every partition it led became a follower (of the new leader) before it closed anything.
    for part in led:
        became_follower = before_close.rfind(f"{topic}-{part}: follower of")
        assert became_follower > before_close.rfind(f"{topic}-{part}: leader at epoch"), before_close[-3000:]
    assert all(node != stopping.node_id for node in cluster.wait_leaders(topic, 6, via=survivors[0]).values())
