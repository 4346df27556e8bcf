"""Pod-level causes on the KafkaCluster (issue 41 item 4), on the real test node (kubelet,
containerd and the scheduler, `flotilla testenv up --kubelet`): what a user reads in
`kubectl get kafkaclusters.flotilla.io -o yaml` and `kubectl describe` when brokers cannot start.

    .venv/bin/pytest tests/e2e/test_operator_pod_problems.py -x -q

Three KafkaClusters in one namespace, created together, with the operator on the host (kopf's
KopfRunner, test_operator_pods.py's fixture): one whose broker image no registry holds (its
reference points at a closed port of this machine, so the kubelet's pull fails at once and offline),
one asking for 1000 CPUs on persistent storage, and one whose broker gets 24 MiB of memory (killed
by the kernel as it starts). Ready and Degraded must name the image and ImagePullFailed for the
first; Unschedulable with the scheduler's "Insufficient cpu" for the second, and its claim left
Pending (WaitForFirstConsumer, the node's storage class, binds only once the pod is scheduled)
after the diagnosis' grace; CrashLoop with the last exit code for the third (the operator reads the
previous container's log when the kubelet kept no termination message); and a Warning Event with
each cause's reason is raised on each KafkaCluster. A timeout prints the pods' status and the
operator's log.
"""

from __future__ import annotations

import json
import re
import uuid

import pytest
from flotilla.testenv.waiting import wait_for
from tests.e2e.test_operator_pods import condition, get_json
from tests.e2e.test_operator_pods import operator  # noqa: F401 - the module's operator on the host (a fixture)

# 900 s as test_operator_pods: the first test may wait up to node.LOCK_TIMEOUT (900 s) for a real node
# another session holds, and then fail saying so rather than on this timeout.
pytestmark = [pytest.mark.kube, pytest.mark.kube_node, pytest.mark.timeout(900)]

MISSING_IMAGE = "127.0.0.1:1/flotilla/missing:0"  # nothing listens on port 1: the pull fails at once
BAD_IMAGE, TOO_BIG, TOO_SMALL = "badimage", "toobig", "toosmall"
#: The diagnosis' claim grace (builders/pod_problems.py CLAIM_GRACE_S, 60 s) plus a few resyncs.
TIMEOUT = 180


@pytest.fixture(scope="module")
def clusters(kube_node_env, operator):
    """Both KafkaClusters, applied at once; the namespace is deleted afterwards."""
    env = kube_node_env
    ns = f"podproblems-{uuid.uuid4().hex[:8]}"
    env.kubectl("create", "namespace", ns)
    for name, spec in (
        (BAD_IMAGE, {"replicas": 1, "image": MISSING_IMAGE, "imagePullPolicy": "Always",
                     "storage": {"type": "ephemeral", "size": "1Gi"}}),
        (TOO_BIG, {"replicas": 1, "imagePullPolicy": "Never", "resources": {"requests": {"cpu": "1000"}},
                   "storage": {"type": "persistent-claim", "size": "1Gi"}}),
        (TOO_SMALL, {"replicas": 1, "imagePullPolicy": "Never", "resources": {"limits": {"memory": "24Mi"}},
                     "storage": {"type": "ephemeral", "size": "1Gi"}}),
    ):
        env.kubectl("apply", "-f", "-", input=json.dumps({
            "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
            "metadata": {"name": name, "namespace": ns}, "spec": spec}))
    yield ns
    for name in (BAD_IMAGE, TOO_BIG, TOO_SMALL):
        env.kubectl("delete", "kafkaclusters.flotilla.io", name, "-n", ns, "--wait=false", check=False)
    env.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def wait_for_conditions(env, operator, ns: str, name: str, what: str, check) -> dict:
    """Wait until `check(ready, degraded)` holds for the KafkaCluster; on timeout print its pods'
    status and the operator's log before failing."""
    def state():
        kc = get_json(env, "kafkaclusters.flotilla.io", name, "-n", ns)
        ready, degraded = condition(kc, "Ready"), condition(kc, "Degraded")
        return {"Ready": ready, "Degraded": degraded} if check(ready, degraded) else None
    try:
        return wait_for(what, state, timeout=TIMEOUT, interval=1.0)
    except BaseException:
        print(json.dumps(get_json(env, "kafkaclusters.flotilla.io", name, "-n", ns, check=False), indent=1)[-3000:])
        for pod in get_json(env, "pods", "-n", ns)["items"]:
            print(pod["metadata"]["name"], json.dumps(pod.get("status", {}))[:2000])
        print(operator.output[-6000:])
        raise


def events(env, ns: str, name: str, reason: str) -> list[dict]:
    return get_json(env, "events", "-n", ns, "--field-selector",
                    f"involvedObject.kind=KafkaCluster,involvedObject.name={name},reason={reason}")["items"]


def test_an_image_no_registry_holds_is_named_on_the_cluster(kube_node_env, operator, clusters):
    env, ns = kube_node_env, clusters
    found = wait_for_conditions(env, operator, ns, BAD_IMAGE, "Ready naming ImagePullFailed and the image",
                                lambda r, d: r.get("reason") == "ImagePullFailed")
    ready, degraded = found["Ready"], found["Degraded"]
    assert ready["status"] == "False" and ready["message"].startswith("0/1 brokers ready: pod badimage-broker-0: "
                                                                     f"image {MISSING_IMAGE} cannot be pulled (")
    assert ("ErrImagePull" in ready["message"]) or ("ImagePullBackOff" in ready["message"]), ready
    assert (degraded["status"], degraded["reason"]) == ("True", "ImagePullFailed")
    event = wait_for("an ImagePullFailed Event on the KafkaCluster",
                     lambda: events(env, ns, BAD_IMAGE, "ImagePullFailed"), timeout=30)[0]
    assert event["type"] == "Warning" and MISSING_IMAGE in event["message"]
    assert event["source"]["component"] == "flotilla-operator"


def test_an_impossible_cpu_request_names_the_schedulers_reason_and_the_pending_claim(
        kube_node_env, operator, clusters):
    env, ns = kube_node_env, clusters
    found = wait_for_conditions(env, operator, ns, TOO_BIG, "Ready naming Unschedulable and, past its grace, the claim",
                                lambda r, d: r.get("reason") == "Unschedulable" and "PersistentVolumeClaim" in
                                r.get("message", ""))
    ready, degraded = found["Ready"], found["Degraded"]
    assert ready["status"] == "False" and degraded["status"] == "True" and degraded["reason"] == "Unschedulable"
    message = ready["message"]
    assert message.startswith("0/1 brokers ready: pod toobig-broker-0 cannot be scheduled: 0/1 nodes are available: ")
    assert "Insufficient cpu" in message, message
    assert "PersistentVolumeClaim data-toobig-broker-0 of pod toobig-broker-0 is Pending (" in message
    for reason, text in (("Unschedulable", "Insufficient cpu"), ("ClaimPending", "data-toobig-broker-0")):
        event = wait_for(f"a {reason} Event on the KafkaCluster", lambda: events(env, ns, TOO_BIG, reason),
                         timeout=30)[0]
        assert event["type"] == "Warning" and text in event["message"], event


def test_a_broker_killed_as_it_starts_is_a_crash_loop_with_its_exit_code(kube_node_env, operator, clusters):
    env, ns = kube_node_env, clusters
    found = wait_for_conditions(env, operator, ns, TOO_SMALL, "Ready naming CrashLoop",
                                lambda r, d: r.get("reason") == "CrashLoop")
    ready, degraded = found["Ready"], found["Degraded"]
    assert ready["status"] == "False" and (degraded["status"], degraded["reason"]) == ("True", "CrashLoop")
    message = ready["message"]
    assert re.match(r"0/1 brokers ready: pod toosmall-broker-0: container broker is crash-looping "
                    r"\(restarted [1-9]\d* times?\), last exit code \d+", message), message
    code = int(re.search(r"last exit code (\d+)", message).group(1))
    assert code != 0, message
    if code == 137:  # killed by the kernel for its memory: the kubelet says so
        assert "last exit code 137 (OOMKilled)" in message, message
    event = wait_for("a CrashLoop Event on the KafkaCluster", lambda: events(env, ns, TOO_SMALL, "CrashLoop"),
                     timeout=30)[0]
    assert event["type"] == "Warning" and "crash-looping" in event["message"]


def test_the_log_tail_of_a_crashed_container_is_read_from_the_kubelet(kube_node_env, clusters, monkeypatch):
    """What completes a CrashLoop whose container left no termination message: Kube.pod_log_tail,
    through the API server, from the kubelet's log of the previous run (a plain pod that writes two
    lines and exits 3, restarted by the kubelet)."""
    import asyncio

    from flotilla_operator.builders import pod_problems as pp
    from flotilla_operator.clients.kube import Kube, load_api_client

    env, ns = kube_node_env, clusters
    env.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "crasher"},
        "spec": {"containers": [{"name": "main", "image": env.image, "imagePullPolicy": "Never",
                                 "command": ["sh", "-c", "echo starting; echo 'the last words'; exit 3"]}]}}))
    pod = wait_for("crasher restarted once", lambda: (lambda p: p if p and any(
        c.get("restartCount", 0) >= 1 for c in (p.get("status") or {}).get("containerStatuses") or ()) else None)(
        get_json(env, "pod", "crasher", "-n", ns, check=False)), timeout=120)
    assert pp.needs_log_tail(pod) == "main" or pp.crash_loops(pod) == [], pod["status"]

    async def tail() -> str:
        kube = Kube(await load_api_client(), "flotilla-test")
        try:
            return await kube.pod_log_tail(ns, "crasher", "main")
        finally:
            await kube.close()
    monkeypatch.setenv("KUBECONFIG", str(env.kubeconfig))
    # Just after a restart the kubelet may not serve the previous log yet ("" then): read again.
    # On timeout the last read shows, with what `kubectl logs --previous` said at the same moment.
    wait_for("the previous run's last lines through Kube.pod_log_tail", lambda: (asyncio.run(tail()), env.kubectl(
        "logs", "crasher", "-n", ns, "--previous", check=False).stdout),
        until=lambda seen: seen[0].splitlines()[-2:] == ["starting", "the last words"], timeout=60, interval=2)
