"""Pod-level causes on the KafkaCluster (issue 41 item 4): builders/pod_problems.py's diagnosis from
pod and claim objects shaped as a kubelet and the scheduler write them (taken from `kubectl get pod
-o json` on the real test node), the conditions status.py makes of them, the Events, and the
reconcile step that reads them (reconcilers/pod_problems.py)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone

from flotilla_operator import events as ev
from flotilla_operator.builders import pod_problems as pp
from flotilla_operator.builders.common import Owner
from flotilla_operator.reconcilers import kafka_cluster as cluster_reconciler
from flotilla_operator.status import kafka_cluster_status

from tests.unit.operator.test_operator_handlers import FakeKube, cluster, memo_for

NOW = datetime(2026, 12, 7, 12, 0, 0, tzinfo=timezone.utc)
LABELS = {"app.kubernetes.io/name": "flotilla", "app.kubernetes.io/instance": "demo",
          "app.kubernetes.io/component": "broker"}
IMAGE = "registry.invalid/flotilla:missing"


def pod(name="demo-broker-0", *, phase="Pending", conditions=(), statuses=None, image=IMAGE, deleted=False):
    meta = {"name": name, "namespace": "ns", "labels": dict(LABELS), "creationTimestamp": "2026-12-07T11:58:00Z"}
    if deleted:
        meta["deletionTimestamp"] = "2026-12-07T11:59:00Z"
    status = {"phase": phase, "conditions": list(conditions), "qosClass": "Burstable"}
    if statuses is not None:
        status["containerStatuses"] = statuses
    return {"kind": "Pod", "metadata": meta, "spec": {"containers": [{"name": "broker", "image": image}]},
            "status": status}


def waiting(reason, message, *, image=IMAGE, restarts=0, last=None):
    return {"name": "broker", "image": image, "imageID": "", "ready": False, "started": False,
            "restartCount": restarts, "state": {"waiting": {"reason": reason, "message": message}},
            "lastState": {"terminated": last} if last else {}}


UNSCHEDULED = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
               "lastTransitionTime": "2026-12-07T11:58:01Z",
               "message": "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: "
                          "1 No preemption victims found for incoming pod."}
PULL_MESSAGE = (f'failed to pull and unpack image "{IMAGE}": failed to resolve reference "{IMAGE}": '
                'failed to do request: Head "https://registry.invalid/v2/flotilla/manifests/missing": '
                "dial tcp: lookup registry.invalid: no such host")


def claim(name="data-demo-broker-0", *, phase="Pending", age_s=120.0, storage_class="local-path"):
    created = (NOW - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "ns", "labels": dict(LABELS), "creationTimestamp": created},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": "1Gi"}}, "volumeMode": "Filesystem"},
            "status": {"phase": phase}}


# -- the diagnosis ------------------------------------------------------------------------------

def test_image_pull_failure_names_the_image_and_the_kubelets_message():
    for reason, message in (("ErrImagePull", PULL_MESSAGE), ("ImagePullBackOff", f'Back-off pulling image "{IMAGE}"')):
        (problem,) = pp.diagnose([pod(statuses=[waiting(reason, message)])], [], now=NOW)
        assert problem.reason == pp.IMAGE_PULL_FAILED and problem.pod == "demo-broker-0"
        assert f"image {IMAGE} cannot be pulled ({reason}" in problem.message
        assert ("no such host" in problem.message) == (reason == "ErrImagePull")


def test_unschedulable_pod_carries_the_schedulers_message():
    (problem,) = pp.diagnose([pod(conditions=[UNSCHEDULED])], [], now=NOW)
    assert problem.reason == pp.UNSCHEDULABLE
    assert problem.message.startswith("pod demo-broker-0 cannot be scheduled: 0/1 nodes are available: 1 Insufficient cpu")


def test_scheduled_and_running_pods_have_no_problem():
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-12-07T11:58:01Z"}
    starting = waiting("ContainerCreating", "")
    running = {"name": "broker", "image": IMAGE, "ready": True, "restartCount": 0,
               "state": {"running": {"startedAt": "2026-12-07T11:58:05Z"}}, "lastState": {}}
    assert pp.diagnose([pod(conditions=[scheduled], statuses=[starting]),
                        pod("demo-broker-1", phase="Running", conditions=[scheduled], statuses=[running])],
                       [claim(phase="Bound"), claim("data-demo-broker-1", phase="Bound")], now=NOW) == []


def test_crash_loop_names_the_exit_code_and_the_termination_messages_last_line():
    last = {"exitCode": 2, "reason": "Error", "message": "starting\nconfig: unknown key 'x'\n",
            "startedAt": "2026-12-07T11:59:00Z", "finishedAt": "2026-12-07T11:59:01Z"}
    back_off = "back-off 40s restarting failed container=broker pod=demo-broker-0_ns(0b7f)"
    crashing = pod(phase="Running", statuses=[waiting("CrashLoopBackOff", back_off, restarts=3, last=last)])
    (problem,) = pp.diagnose([crashing], [], now=NOW)
    assert problem.reason == pp.CRASH_LOOP
    assert problem.message == ("pod demo-broker-0: container broker is crash-looping (restarted 3 times), "
                               "last exit code 2 (Error); last output: config: unknown key 'x'")
    assert pp.needs_log_tail(crashing) is None  # the termination message says it: no log read


def test_crash_loop_without_termination_message_takes_the_log_tail_the_caller_read():
    last = {"exitCode": 137, "reason": "OOMKilled"}
    crashing = pod(phase="Running", statuses=[waiting("CrashLoopBackOff", "back-off 10s", restarts=1, last=last)])
    assert pp.needs_log_tail(crashing) == "broker"
    (without,) = pp.diagnose([crashing], [], now=NOW)
    assert without.message.endswith("(restarted 1 time), last exit code 137 (OOMKilled)")
    (with_log,) = pp.diagnose([crashing], [], now=NOW, log_tails={"demo-broker-0": "loading 3 logs\nopened 12\n"})
    assert with_log.message.endswith("last exit code 137 (OOMKilled); last output: opened 12")


def test_pending_claim_counts_after_its_grace_and_only_while_its_pod_does_not_run():
    unscheduled_pod = pod()
    (problem,) = pp.diagnose([unscheduled_pod], [claim()], now=NOW)
    assert problem.reason == pp.CLAIM_PENDING and problem.pod == "demo-broker-0"
    assert problem.message.startswith("PersistentVolumeClaim data-demo-broker-0 of pod demo-broker-0 is Pending "
                                      "(storage class local-path, 1Gi)")
    # WaitForFirstConsumer: a fresh claim is Pending until the pod is scheduled.
    assert pp.diagnose([unscheduled_pod], [claim(age_s=10)], now=NOW) == []
    assert pp.diagnose([pod(phase="Running")], [claim()], now=NOW) == []
    # No pod at all (not created yet): the claim's own pod name.
    (orphan,) = pp.diagnose([], [claim("data-demo-broker-2")], now=NOW)
    assert orphan.pod == "demo-broker-2"


def test_problems_are_ordered_and_a_deleted_pod_counts_for_nothing():
    pods = [pod("demo-broker-2", statuses=[waiting("ImagePullBackOff", "Back-off")]),
            pod("demo-broker-1", conditions=[UNSCHEDULED]),
            pod("demo-broker-0", statuses=[waiting("ErrImagePull", PULL_MESSAGE)]),
            pod("demo-broker-3", conditions=[UNSCHEDULED], deleted=True)]
    found = pp.diagnose(pods, [], now=NOW)
    assert [(p.reason, p.pod) for p in found] == [
        (pp.UNSCHEDULABLE, "demo-broker-1"), (pp.IMAGE_PULL_FAILED, "demo-broker-0"),
        (pp.IMAGE_PULL_FAILED, "demo-broker-2")]
    assert pp.summary(found, limit=2).endswith("; and 1 more")


def test_long_messages_are_clipped():
    (problem,) = pp.diagnose([pod(conditions=[{**UNSCHEDULED, "message": "x" * 5000}])], [], now=NOW)
    assert len(problem.message) < 400 and problem.message.endswith("...")


# -- conditions and Events ------------------------------------------------------------------------

OWNER = Owner("demo", "ns", "uid-1", generation=2)
STS = {"metadata": {"generation": 1}, "spec": {"replicas": 3},
       "status": {"observedGeneration": 1, "replicas": 3, "readyReplicas": 0, "updatedReplicas": 3,
                  "currentRevision": "r1", "updateRevision": "r1"}}


def conditions(status):
    return {c["type"]: c for c in status["conditions"]}


def test_ready_and_degraded_name_the_cause_instead_of_only_a_count():
    problems = pp.diagnose([pod(statuses=[waiting("ImagePullBackOff", "Back-off")])], [], now=NOW)
    status = kafka_cluster_status(OWNER, replicas=3, port=9092, config_hash=None, statefulset=STS, now=NOW,
                                  pod_problems=problems)
    ready, degraded = conditions(status)["Ready"], conditions(status)["Degraded"]
    assert (ready["status"], ready["reason"]) == ("False", "ImagePullFailed")
    assert ready["message"].startswith(f"0/3 brokers ready: pod demo-broker-0: image {IMAGE} cannot be pulled")
    assert (degraded["status"], degraded["reason"], degraded["message"]) == ("True", "ImagePullFailed", ready["message"])
    assert conditions(status)["Stalled"]["status"] == "False"  # pushing the image fixes it: not the spec
    # Without problems: the count alone, as before.
    plain = conditions(kafka_cluster_status(OWNER, replicas=3, port=9092, config_hash=None, statefulset=STS, now=NOW))
    assert plain["Degraded"]["reason"] == "BrokersNotReady" and plain["Ready"]["message"] == "0/3 brokers ready"


def test_an_apply_error_wins_over_pod_problems():
    problems = pp.diagnose([pod(conditions=[UNSCHEDULED])], [], now=NOW)
    status = kafka_cluster_status(OWNER, replicas=3, port=9092, config_hash=None, statefulset=STS, now=NOW,
                                  pod_problems=problems, error="applying Service x: denied", error_reason="ApplyFailed")
    assert conditions(status)["Ready"]["reason"] == "ApplyFailed"


def test_a_ready_cluster_losing_a_broker_to_a_crash_loop_says_cluster_not_ready_too():
    ready_sts = {**STS, "status": {**STS["status"], "readyReplicas": 3}}
    was = kafka_cluster_status(OWNER, replicas=3, port=9092, config_hash=None, statefulset=ready_sts, now=NOW)
    last = {"exitCode": 1, "reason": "Error", "message": "fatal\n"}
    crashing = pp.diagnose([pod(phase="Running", statuses=[waiting("CrashLoopBackOff", "back-off", restarts=1,
                                                                      last=last)])], [], now=NOW)
    now = kafka_cluster_status(OWNER, replicas=3, port=9092, config_hash=None, now=NOW, pod_problems=crashing,
                               statefulset={**STS, "status": {**STS["status"], "readyReplicas": 2}})
    found = {e.reason: e for e in ev.cluster_events(was, now)}
    assert found["ClusterNotReady"].message.startswith("2/3 brokers ready: pod demo-broker-0: container broker is")


def test_an_event_per_problem_that_appears():
    first = pp.diagnose([pod(conditions=[UNSCHEDULED])], [], now=NOW)
    (event,) = ev.pod_problem_events(set(), first)
    assert (event.type, event.reason) == (ev.WARNING, "Unschedulable") and "Insufficient cpu" in event.message
    assert ev.pod_problem_events({p.key for p in first}, first) == []


# -- the reconcile step ---------------------------------------------------------------------------

class EventKube(FakeKube):
    def __init__(self, objects):
        super().__init__(objects)
        self.events = []
        self.logs_read = []

    async def post_event(self, event):
        self.events.append(event)

    async def pod_log_tail(self, namespace, name, container, *, lines=5):
        self.logs_read.append((name, container))
        return "broker: fatal: cannot open /var/lib/flotilla/data\n"


async def test_reconcile_writes_the_cause_and_raises_its_event_once():
    kube = EventKube([cluster(), {**pod(statuses=[waiting("ErrImagePull", PULL_MESSAGE)]), "kind": "Pod"}])
    memo = memo_for(kube)
    status = await cluster_reconciler.reconcile(memo, "ns", "demo", why="test")
    ready = conditions(status)["Ready"]
    assert ready["reason"] == "ImagePullFailed" and IMAGE in ready["message"]
    pulls = [e for e in kube.events if e["reason"] == "ImagePullFailed"]
    assert len(pulls) == 1 and pulls[0]["type"] == "Warning" and pulls[0]["involvedObject"]["kind"] == "KafkaCluster"
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="resync")
    assert len([e for e in kube.events if e["reason"] == "ImagePullFailed"]) == 1


async def test_refresh_status_reads_a_crash_loops_log_when_the_kubelet_kept_no_message():
    crashing = pod(phase="Running", statuses=[waiting("CrashLoopBackOff", "back-off", restarts=2,
                                                      last={"exitCode": 1, "reason": "Error"})])
    kube = EventKube([cluster(), crashing])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="test")
    sts = copy.deepcopy(kube.objects[("StatefulSet", "ns", "demo-broker")])
    await cluster_reconciler.refresh_status(memo, "ns", "demo", sts)
    ready = conditions(kube.objects[("KafkaCluster", "ns", "demo")]["status"])["Ready"]
    assert ready["reason"] == "CrashLoop"
    assert "last exit code 1 (Error); last output: broker: fatal: cannot open /var/lib/flotilla/data" in ready["message"]
    assert ("demo-broker-0", "broker") in kube.logs_read


async def test_the_kubelets_log_unavailable_answer_is_no_log_line():
    """Just after a restart the kubelet answered `unable to retrieve container logs for
    containerd://...` with 200 (the real node, tests/e2e/test_operator_pod_problems.py): no
    "last output" is made of it."""
    from flotilla_operator.clients.kube import Kube

    answers = ["unable to retrieve container logs for containerd://7557e76c28cc", "starting\nthe last words\n"]
    calls = []

    class Answering(Kube):
        async def _call(self, method, path, **kw):
            calls.append((method, path, dict(kw["query"])))
            return answers.pop(0)

    kube = Answering(api=None, field_manager="test")
    assert await kube.pod_log_tail("ns", "demo-broker-0", "broker") == ""
    assert await kube.pod_log_tail("ns", "demo-broker-0", "broker") == "starting\nthe last words\n"
    assert calls[0][:2] == ("GET", "/api/v1/namespaces/ns/pods/demo-broker-0/log")
    assert calls[0][2] == {"container": "broker", "previous": "true", "tailLines": "5"}
