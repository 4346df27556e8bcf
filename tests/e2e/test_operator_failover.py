"""Two operator replicas with leader election (`flotilla operator --leader-elect`) against the real
control plane (kube-apiserver, etcd, controller-manager, scheduler, kwok pods), each a process as
the Deployment runs it: one leads and reconciles, the other stands by and touches nothing; the
leader killed with SIGKILL while a KafkaCluster is being brought up, the standby takes the Lease
and the KafkaCluster converges (Ready, every child present, a deleted child re-created); a clean
stop (SIGTERM) releases the Lease. A leader cut off the API server (tests/support/api_cut.py) exits
at its renew deadline, before the standby takes the Lease: never two reconciling at once.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_failover.py

Lease timings are this test's (short), never the product's defaults. On a timeout or a failed
assertion both operators' logs are printed.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from flotilla_operator.election.process import EXIT_LOST
from tests.e2e.test_operator import CHILDREN, IMAGE, condition, get_json, kafkacluster
from tests.support.api_cut import ApiCut
from flotilla.testenv.brokers.broker_process import REPO_ROOT
from flotilla.testenv.brokers.crds import install_crds
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.kube

LEASE = "flotilla-operator"
# Test settings: a takeover within seconds. The product's defaults are 15 / 10 / 2.
LEASE_DURATION_S, RENEW_DEADLINE_S, RETRY_PERIOD_S = 4, 3, 0.5


class Replica:
    def __init__(self, name: str, kube_env, namespace: str, log_dir: Path, kubeconfig: Path | None = None) -> None:
        self.name, self.log = name, log_dir / f"operator-{name}.log"
        env = dict(kube_env.env, KUBECONFIG=str(kubeconfig or kube_env.kubeconfig), FLOTILLA_BROKER_IMAGE=IMAGE,
                   PYTHONUNBUFFERED="1", POD_NAME=f"replica-{name}")
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "flotilla.cli", "operator", "-n", namespace, "--resync-seconds=3",
                 "--leader-elect", f"--lease-namespace={namespace}", f"--lease-duration={LEASE_DURATION_S}",
                 f"--renew-deadline={RENEW_DEADLINE_S}", f"--retry-period={RETRY_PERIOD_S}",
                 "--metrics-address=127.0.0.1:0", "--liveness-address=off", "--health-address=127.0.0.1:0"],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO_ROOT)

    def output(self) -> str:
        return self.log.read_text()

    @property
    def identity(self) -> str | None:
        m = re.search(r" as (replica-\S+) \(", self.output())
        return m.group(1) if m else None

    def health(self) -> tuple[int, dict]:
        port = re.search(r"health http://127\.0\.0\.1:(\d+)", self.output()).group(1)
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def metric(self, name: str) -> float | None:
        """One unlabelled sample of this replica's /metrics (None: not exported)."""
        # The last one: `flotilla operator` first prints the address asked for (port 0).
        url = re.findall(r"metrics (http://127\.0\.0\.1:\d+/metrics)", self.output())[-1]
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        return next((s.value for f in text_string_to_metric_families(text) for s in f.samples
                     if s.name == name and not s.labels), None)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def replicas(kube_env, kube_namespace, tmp_path):
    install_crds(kube_env)
    started: list[Replica] = []
    yield lambda name, kubeconfig=None: (started.append(Replica(name, kube_env, kube_namespace, tmp_path, kubeconfig))
                                         or started[-1])
    for r in started:
        r.stop()
    for r in started:  # pytest shows a teardown's output with a failure
        print(f"===== operator {r.name} (exit {r.proc.returncode}) =====\n{r.output()[-6000:]}")


def holder(kube_env, ns: str) -> dict:
    return (get_json(kube_env, "lease", LEASE, "-n", ns, check=False) or {}).get("spec") or {}


def logs(*rs: Replica) -> str:
    return "\n".join(f"===== operator {r.name} =====\n{r.output()[-4000:]}" for r in rs)


@pytest.mark.timeout(300)
def test_the_standby_takes_over_when_the_leader_is_killed_mid_reconcile(kube_env, kube_namespace, replicas):
    ns, name = kube_namespace, "survivor"
    a = replicas("a")
    wait_for("replica a to lead", lambda: holder(kube_env, ns).get("holderIdentity") == a.identity
             and "leads; starting the operator" in a.output(), timeout=60)
    b = replicas("b")
    wait_for("replica b to stand by", lambda: "standing by" in b.output() and b.health()[0] == 200, timeout=60)
    assert b.health()[1]["role"] == "standby" and b.health()[1]["holder"] == a.identity, logs(a, b)
    wait_for("replica a ready as the leader", lambda: a.health()[0] == 200 and a.health()[1]["role"] == "leader",
             timeout=60)

    # The election gauges the operator alerts read (monitoring/prometheus-rules.yaml).
    assert (a.metric("flotilla_operator_leader"), b.metric("flotilla_operator_leader")) == (1, 0), logs(a, b)
    assert (a.metric("flotilla_operator_ready"), b.metric("flotilla_operator_ready")) == (1, 1), logs(a, b)

    kube_env.kubectl("apply", "-f", "-", input=json.dumps(kafkacluster(name, ns, replicas=3)))
    wait_for("the leader to start reconciling", lambda: get_json(kube_env, "serviceaccount", f"{name}-broker",
                                                                 "-n", ns, check=False), timeout=60, interval=0.1)
    a.proc.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    a.proc.wait(10)
    kc = get_json(kube_env, "kafkacluster", name, "-n", ns)
    assert condition(kc, "Ready").get("status") != "True", "killed too late: the cluster was Ready already"
    assert "starting the operator" not in b.output(), logs(a, b)  # the standby never reconciled

    wait_for("replica b to take the Lease", lambda: holder(kube_env, ns).get("holderIdentity") == b.identity,
             timeout=60)
    took_s = time.monotonic() - killed_at
    lease = holder(kube_env, ns)
    assert lease["leaseTransitions"] >= 1 and lease["leaseDurationSeconds"] == LEASE_DURATION_S, lease
    # Not before a's Lease ran out by b's clock: a silent leader is waited for.
    assert took_s >= LEASE_DURATION_S - RENEW_DEADLINE_S, took_s

    def converged():
        got = get_json(kube_env, "kafkacluster", name, "-n", ns)
        st = got.get("status") or {}
        ok = (condition(got, "Ready").get("status") == "True" and st.get("readyReplicas") == 3
              and st.get("observedGeneration") == got["metadata"]["generation"])
        return got if ok else st.get("conditions")

    try:
        wait_for("the KafkaCluster Ready under the new leader", converged, until=lambda g: isinstance(g, dict) and
                 "metadata" in g, timeout=150)
        for kind, pattern in CHILDREN:
            assert get_json(kube_env, kind, pattern.format(name=name), "-n", ns, check=False), kind
        # The new leader reconciles: drift is repaired by its resync.
        kube_env.kubectl("delete", "configmap", f"{name}-config", "-n", ns)
        wait_for("the deleted ConfigMap re-created", lambda: get_json(kube_env, "configmap", f"{name}-config",
                                                                      "-n", ns, check=False), timeout=60)
        assert b.health()[0] == 200 and b.health()[1]["role"] == "leader"
        assert b.metric("flotilla_operator_leader") == 1
    except BaseException:
        print(logs(a, b))
        raise

    # A clean stop hands the Lease back at once.
    b.proc.send_signal(signal.SIGTERM)
    assert b.proc.wait(60) == 0, logs(b)
    assert "released Lease" in b.output(), logs(b)
    assert not holder(kube_env, ns).get("holderIdentity"), holder(kube_env, ns)


def logged_at(line: str) -> datetime:
    """The time of a log line of the operator ("[2026-12-07 17:28:52,695] ...", local time)."""
    stamp = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]", line).group(1)
    return datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S,%f").astimezone(timezone.utc)


@pytest.mark.timeout(300)
def test_a_leader_cut_off_the_api_server_exits_before_the_standby_takes_over(kube_env, kube_namespace, replicas,
                                                                            tmp_path):
    ns = kube_namespace
    cut = ApiCut(kube_env.kubeconfig, tmp_path / "api-a")
    try:
        a = replicas("a", kubeconfig=cut.kubeconfig)
        wait_for("replica a to lead", lambda: holder(kube_env, ns).get("holderIdentity") == a.identity
                 and "leads; starting the operator" in a.output(), timeout=60)
        b = replicas("b")
        wait_for("replica b to stand by", lambda: "standing by" in b.output(), timeout=60)
        cut.cut()  # a can neither renew nor read; b sees no renewal
        wait_for("replica b to take the Lease", lambda: holder(kube_env, ns).get("holderIdentity") == b.identity,
                 timeout=60)
        assert a.proc.wait(30) == EXIT_LOST, logs(a, b)
        (lost,) = [line for line in a.output().splitlines() if "lost the leader election Lease" in line]
        assert "renew deadline" in lost, lost
        acquired = datetime.strptime(holder(kube_env, ns)["acquireTime"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(
            tzinfo=timezone.utc)
        # a stopped reconciling (exited) before b started: the deadline (3 s) is shorter than the
        # duration (4 s) that b waits from the last renewal it saw.
        assert logged_at(lost) < acquired, (lost, acquired, logs(a, b))
        wait_for("replica b ready as the leader", lambda: b.health()[1]["role"] == "leader", timeout=60)
    finally:
        cut.close()
