"""The operator's two replicas on the real test node (kubelet, containerd: probes really run),
installed from install/flotilla-all-namespaces.yaml as test_operator_in_cluster.py installs it:
a `kubectl rollout restart` goes through (a new pod becomes a Ready standby before an old one
goes) with a Ready replica at every look and the Lease handed over well within a lease duration
(the stopped leader releases it); the PodDisruptionBudget refuses to evict the last Ready replica.

    pytest -p flotilla.testenv.pytest_plugin tests/e2e/test_operator_rollout.py
"""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from tests.e2e.test_operator_in_cluster import OPERATOR_NS, OPERATOR_PODS, installed, operator_log  # noqa: F401
from tests.e2e.test_operator_pods import condition, get_json
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.kube_node]

LEASE_DURATION_S = 15  # the chart's default, which the install manifest carries


def lease(env) -> dict:
    return get_json(env, "lease", "flotilla-operator", "-n", OPERATOR_NS)["spec"]


def ready_pods(env) -> list[str]:
    pods = get_json(env, "pods", "-n", OPERATOR_NS, "-l", OPERATOR_PODS)["items"]
    return [p["metadata"]["name"] for p in pods
            if condition(p, "Ready").get("status") == "True" and not p["metadata"].get("deletionTimestamp")]


def evict(env, pod: str) -> subprocess.CompletedProcess:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod, "namespace": OPERATOR_NS}}
    return env.kubectl("create", "--raw", f"/api/v1/namespaces/{OPERATOR_NS}/pods/{pod}/eviction", "-f", "-",
                       input=json.dumps(body), check=False)


@pytest.mark.timeout(600)
def test_a_rolling_restart_keeps_a_ready_replica_and_hands_the_lease_over_at_once(kube_node_env, installed):
    env = kube_node_env
    before = lease(env)
    assert before.get("holderIdentity"), before
    old_pods = set(ready_pods(env))
    assert len(old_pods) == 2, old_pods
    env.kubectl("rollout", "restart", "deployment/flotilla-operator", "-n", OPERATOR_NS)
    holders: list[tuple[float, str]] = [(time.monotonic(), before["holderIdentity"])]
    deadline = time.monotonic() + 300
    try:
        while True:
            now, ready = time.monotonic(), ready_pods(env)
            assert ready, "no operator replica Ready during the rollout"
            holder = lease(env).get("holderIdentity") or ""
            if holder != holders[-1][1]:
                holders.append((now, holder))
            done = (len(ready) == 2 and not set(ready) & old_pods
                    and any(holder.startswith(p + "_") for p in ready))
            if done:
                break
            assert now < deadline, f"rollout not done after 300 s: ready {ready}, holders {holders}"
            time.sleep(0.3)
    except BaseException:
        print(env.kubectl("get", "pods", "-n", OPERATOR_NS, "-o", "wide", check=False).stdout)
        print(operator_log(env))
        raise
    # The old leader released the Lease ("" seen in between, or a new holder within seconds): the
    # standby took it without waiting out a lease duration.
    after = lease(env)
    assert after["leaseTransitions"] > before.get("leaseTransitions", 0), (before, after)
    old_holder_gone = next(t for t, h in holders if h != before["holderIdentity"])
    new_holder_at = next(t for t, h in holders if h and h != before["holderIdentity"])
    assert new_holder_at - old_holder_gone < LEASE_DURATION_S, holders

    # The PodDisruptionBudget: one eviction goes through; the other replica is the last Ready one
    # until the replacement is Ready, so its eviction is refused.
    wait_for("the budget to allow one disruption", lambda: (get_json(env, "pdb", "flotilla-operator", "-n", OPERATOR_NS)
                                                            .get("status") or {}).get("disruptionsAllowed") == 1,
             timeout=60)
    first, second = sorted(ready_pods(env))
    assert evict(env, first).returncode == 0
    refused = evict(env, second)
    assert refused.returncode != 0 and "disruption budget" in refused.stderr, refused.stderr
    wait_for("two Ready operator replicas again", lambda: len(ready_pods(env)) == 2, timeout=180)
