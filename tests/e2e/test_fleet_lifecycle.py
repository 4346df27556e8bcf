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

from tests.support import kafka_wire
from tests.support.cluster import BrokerCluster, ClusterBroker
from tests.support.waiting import wait_for

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

