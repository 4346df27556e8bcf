"""Operating a fleet (issue 22) against a real control plane with kwok's fake kubelets, the
operator run in-process: what a platform team looks at and steers.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator_fleet_ops.py

Covers: conditions in Kubernetes' shape (Stalled for a spec the broker would refuse and for a
ClientQuota conflict), an Event for every action with a grep-able reason (`kubectl describe`
shows them), the one-line state of `kubectl get kafkaclusters,clientquotas,recorddeletions`; the
pause annotation (nothing applied or run, ReconciliationPaused) and the manual-rolling-update
annotation (every broker replaced, one at a time, the annotation removed); and GitOps: the
examples and samples of every kind, applied twice with server-side apply as Argo CD would, give no
conflict, no dry-run difference and no write the second time, and no field manager but the GitOps tool's owns
anything in spec.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from tests.e2e.test_operator import (PodWatch, apply, broker_pods, condition, get_json, kafkacluster,
                                     most_out_at_once, ready_at_generation)
from tests.e2e.test_operator_recovery import running_operator
from flotilla.testenv.brokers.crds import install_crds
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.kube

ROOT = Path(__file__).resolve().parents[2]
GITOPS_MANAGER = "argocd-controller"


@pytest.fixture(scope="module")
def operator(kube_env):
    install_crds(kube_env)
    with running_operator(kube_env) as runner:
        yield runner


def events_of(kube_env, ns: str, kind: str, name: str) -> list[dict]:
    got = get_json(kube_env, "events", "-n", ns, "--field-selector",
                   f"involvedObject.kind={kind},involvedObject.name={name}")
    return sorted(got["items"], key=lambda e: (e.get("lastTimestamp") or "", e["metadata"]["creationTimestamp"]))


def reasons_of(kube_env, ns: str, kind: str, name: str) -> list[str]:
    return [e["reason"] for e in events_of(kube_env, ns, kind, name)]


def wait_event(kube_env, ns: str, kind: str, name: str, reason: str, count: int = 1, timeout: float = 60) -> list[dict]:
    return wait_for(f"{count} Event(s) {reason} about {kind} {name}",
                    lambda: [e for e in events_of(kube_env, ns, kind, name) if e["reason"] == reason],
                    until=lambda found: len(found) >= count, timeout=timeout)


def wait_condition(kube_env, ns: str, kind: str, name: str, type_: str, status: str, reason: str | None = None,
                   timeout: float = 60) -> dict:
    def check():
        obj = get_json(kube_env, kind, name, "-n", ns)
        c = condition(obj, type_)
        return obj if c.get("status") == status and (reason is None or c.get("reason") == reason) else None
    return wait_for(f"{kind} {name}: {type_}={status} {reason or ''}", check, timeout=timeout)


def restarted_brokers(kube_env, ns: str, name: str) -> set[int]:
    """The brokers named by BrokerRestarting Events ("replacing broker <n> (pod ...) ...")."""
    return {int(e["message"].split()[2]) for e in events_of(kube_env, ns, "KafkaCluster", name)
            if e["reason"] == "BrokerRestarting"}


def patch(kube_env, ns: str, kind: str, name: str, body: dict) -> None:
    kube_env.kubectl("patch", kind, name, "-n", ns, "--type=merge", "-p", json.dumps(body))


def test_conditions_events_and_the_one_line_state(kube_env, kube_namespace, operator):
    ns, name = kube_namespace, "ops"
    apply(kube_env, kafkacluster(name, ns, replicas=2))
    kc = wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, name, 2), timeout=120)
    for c in kc["status"]["conditions"]:  # metav1.Condition's shape
        assert {"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"} <= set(c), c
    assert (condition(kc, "Stalled")["status"], condition(kc, "Stalled")["reason"]) == ("False", "AsExpected")
    ready_event = wait_event(kube_env, ns, "KafkaCluster", name, "ClusterReady")[0]
    assert ready_event["type"] == "Normal" and ready_event["source"]["component"] == "flotilla-operator"
    assert "ClusterReady" in kube_env.kubectl("describe", "kafkacluster", name, "-n", ns).stdout

    # A config change: the roll announces itself, broker by broker.
    patch(kube_env, ns, "kafkacluster", name, {"spec": {"config": {"log.retention.ms": "7200000"}}})
    wait_for("Ready after the roll", ready_at_generation(kube_env, ns, name, 2), timeout=120)
    wait_event(kube_env, ns, "KafkaCluster", name, "RollFinished")
    reasons = reasons_of(kube_env, ns, "KafkaCluster", name)
    assert "RollStarted" in reasons, reasons
    assert restarted_brokers(kube_env, ns, name) == {0, 1}, reasons

    # A config the broker would refuse: Stalled (Flux fails fast), a Warning naming it; fixed, it clears.
    patch(kube_env, ns, "kafkacluster", name, {"spec": {"config": {"log.retention.hour": "5"}}})
    kc = wait_condition(kube_env, ns, "kafkacluster", name, "Stalled", "True", "InvalidConfig")
    assert "log.retention.hour" in condition(kc, "Stalled")["message"]
    warning = wait_event(kube_env, ns, "KafkaCluster", name, "InvalidConfig")[0]
    assert warning["type"] == "Warning"
    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=json", "-p", json.dumps(
        [{"op": "remove", "path": "/spec/config/log.retention.hour"}]))
    kc = wait_for("Ready once fixed", ready_at_generation(kube_env, ns, name, 2), timeout=60)
    assert condition(kc, "Stalled")["status"] == "False"

    # ClientQuotas: the cluster's bootstrap Service has no broker behind it here (kwok), so the
    # quota is not applied (a Warning); a second resource for the same client is a Conflict: Stalled.
    def quota(qname: str) -> dict:
        return {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": qname, "namespace": ns},
                "spec": {"clusterRef": {"name": name}, "entity": {"clientId": "etl"}, "producerByteRate": 1048576}}
    apply(kube_env, quota("etl"))
    wait_condition(kube_env, ns, "clientquota", "etl", "Ready", "False", "Unreachable")
    assert wait_event(kube_env, ns, "ClientQuota", "etl", "QuotaNotApplied")[0]["type"] == "Warning"
    apply(kube_env, quota("etl-again"))
    got = wait_condition(kube_env, ns, "clientquota", "etl-again", "Stalled", "True", "Conflict")
    assert "etl" in condition(got, "Ready")["message"]
    wait_event(kube_env, ns, "ClientQuota", "etl-again", "Conflict")
    deletion = {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": "purge", "namespace": ns},
                "spec": {"clusterRef": {"name": name}, "topic": "t", "before": {"offset": 5}}}
    apply(kube_env, deletion)
    wait_for("the RecordDeletion's first run", lambda: condition(get_json(kube_env, "recorddeletion", "purge", "-n", ns), "Ready"),
             timeout=90)
    assert wait_event(kube_env, ns, "RecordDeletion", "purge", "DeletionFailed", timeout=90)[0]["type"] == "Warning"

    # One line each, with the state and why.
    table = kube_env.kubectl("get", "kafkaclusters,clientquotas,recorddeletions", "-n", ns).stdout
    lines = {line.split()[0]: line for line in table.splitlines() if line.strip() and not line.startswith("NAME")}
    assert "True" in lines[f"kafkacluster.flotilla.io/{name}"] and "BrokersReady" in lines[f"kafkacluster.flotilla.io/{name}"], table
    assert "Unreachable" in lines["clientquota.flotilla.io/etl"] and "Conflict" in lines["clientquota.flotilla.io/etl-again"], table
    headers = [line.split() for line in table.splitlines() if line.startswith("NAME")]
    assert len(headers) == 3 and all("READY" in h and "REASON" in h for h in headers), table
    assert "Unreachable" in lines["recorddeletion.flotilla.io/purge"], table
    wide = kube_env.kubectl("get", "clientquotas", "-n", ns, "-o", "wide").stdout
    assert "MESSAGE" in wide and "ClientQuota etl already sets the quota" in wide, wide


def test_pause_annotation_changes_nothing_until_removed(kube_env, kube_namespace, operator):
    ns, name = kube_namespace, "paused"
    apply(kube_env, kafkacluster(name, ns, replicas=1, config={"log.retention.ms": "3600000"}))
    wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, name, 1), timeout=120)
    kube_env.kubectl("annotate", "kafkacluster", name, "-n", ns, "flotilla.io/pause-reconciliation=true")
    wait_condition(kube_env, ns, "kafkacluster", name, "ReconciliationPaused", "True", "ReconciliationPaused")
    wait_event(kube_env, ns, "KafkaCluster", name, "ReconciliationPaused")
    patch(kube_env, ns, "kafkacluster", name, {"spec": {"config": {"log.retention.ms": "7200000"}}})
    generation = get_json(kube_env, "kafkacluster", name, "-n", ns)["metadata"]["generation"]
    # The operator has seen the new generation (the status says so) and applied none of it.
    kc = wait_for("the paused status to observe the new generation", lambda: (
        lambda o: o if o["status"].get("observedGeneration") == generation else None
    )(get_json(kube_env, "kafkacluster", name, "-n", ns)), timeout=60)
    assert condition(kc, "ReconciliationPaused")["status"] == "True"
    assert condition(kc, "Reconciling")["status"] == "False"
    props = get_json(kube_env, "configmap", f"{name}-config", "-n", ns)["data"]["server.properties"]
    assert "log.retention.ms=3600000" in props.splitlines() and "log.retention.ms=7200000" not in props

    kube_env.kubectl("annotate", "kafkacluster", name, "-n", ns, "flotilla.io/pause-reconciliation-")
    kc = wait_for("Ready with the new spec", ready_at_generation(kube_env, ns, name, 1), timeout=120)
    assert condition(kc, "ReconciliationPaused") == {}
    assert "log.retention.ms=7200000" in get_json(kube_env, "configmap", f"{name}-config", "-n", ns)["data"]["server.properties"]
    wait_event(kube_env, ns, "KafkaCluster", name, "ReconciliationResumed")

    # A RecordDeletion created paused runs nothing until the annotation goes.
    deletion = {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion",
                "metadata": {"name": "held", "namespace": ns, "annotations": {"flotilla.io/pause-reconciliation": "true"}},
                "spec": {"clusterRef": {"name": name}, "topic": "t", "before": {"offset": 5}}}
    apply(kube_env, deletion)
    held = wait_condition(kube_env, ns, "recorddeletion", "held", "ReconciliationPaused", "True")
    assert "lastRunTime" not in held["status"] and condition(held, "Ready") == {}
    kube_env.kubectl("annotate", "recorddeletion", "held", "-n", ns, "flotilla.io/pause-reconciliation-")
    ran = wait_for("the resumed RecordDeletion to run", lambda: (
        lambda o: o if condition(o, "Ready") and not condition(o, "ReconciliationPaused") else None
    )(get_json(kube_env, "recorddeletion", "held", "-n", ns)), timeout=90)
    assert ran["status"]["observedGeneration"] == ran["metadata"]["generation"]
    wait_event(kube_env, ns, "RecordDeletion", "held", "ReconciliationResumed")


def test_manual_rolling_update_replaces_every_broker_one_at_a_time(kube_env, kube_namespace, operator, tmp_path):
    ns, name = kube_namespace, "restart"
    apply(kube_env, kafkacluster(name, ns, replicas=3))
    wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, name, 3), timeout=120)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(kube_env, ns, name)}
    watch = PodWatch(kube_env, ns, name, tmp_path / "pod-events.json")
    try:
        wait_for("the pod watch to list the brokers", lambda: {e["object"]["metadata"]["name"] for e in watch.events()},
                 until=lambda seen: seen >= set(before), timeout=60)
        kube_env.kubectl("annotate", "kafkacluster", name, "-n", ns, "flotilla.io/manual-rolling-update=true")
        wait_for("the annotation acknowledged (removed)", lambda: "flotilla.io/manual-rolling-update" not in (
            get_json(kube_env, "kafkacluster", name, "-n", ns)["metadata"].get("annotations") or {}), timeout=60)
        wait_for("every broker replaced and Ready", lambda: (
            lambda pods: len(pods) == 3 and not {p["metadata"]["uid"] for p in pods} & set(before.values())
            and all(p["metadata"]["labels"].get("controller-revision-hash") for p in pods)
        )(broker_pods(kube_env, ns, name)), timeout=180)
        wait_for("Ready after the restart", ready_at_generation(kube_env, ns, name, 3), timeout=120)
    finally:
        events = watch.stop()
    worst, out = most_out_at_once(events, sorted(before), set(before.values()))
    assert worst == 1, f"{worst} brokers out at once during the restart: {out}"
    wait_event(kube_env, ns, "KafkaCluster", name, "RollFinished")
    reasons = reasons_of(kube_env, ns, "KafkaCluster", name)
    assert "RollingRestartRequested" in reasons and restarted_brokers(kube_env, ns, name) == {0, 1, 2}, reasons
    sts = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)
    assert "flotilla.io/restarted-at" in sts["spec"]["template"]["metadata"]["annotations"]


# ---------------------------------------------------------------------------------------------
# GitOps: server-side apply as Argo CD does it, twice


def gitops_documents(cluster: str) -> list[dict]:
    """Every document of examples/, and a sample of each kind the examples lack."""
    every = [d for path in sorted((ROOT / "examples").glob("*.yaml"))
             for d in yaml.safe_load_all(path.read_text()) if d]
    # Alternatives of one object (the persistent and the development KafkaCluster `demo`): the
    # first, as a Git repository holds one of them.
    docs: list[dict] = []
    for d in every:
        if (d["kind"], d["metadata"]["name"]) not in {(o["kind"], o["metadata"]["name"]) for o in docs}:
            docs.append(d)
    kinds = {d["kind"] for d in docs}
    samples = [
        {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
         "metadata": {"name": "orders", "labels": {"flotilla.io/cluster": cluster, "app.kubernetes.io/instance": cluster}},
         "spec": {"partitions": 3, "replicas": 1, "config": {"retention.ms": 86400000, "cleanup.policy": "delete"}}},
        {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "noisy-client"},
         "spec": {"clusterRef": {"name": cluster}, "entity": {"clientId": "noisy"}, "producerByteRate": 1048576}},
        {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": "sample-purge"},
         "spec": {"clusterRef": {"name": cluster}, "topic": "orders", "before": {"offset": 10}}},
    ]
    docs += [s for s in samples if s["kind"] not in kinds]
    assert {"KafkaCluster", "KafkaTopic", "ClientQuota", "RecordDeletion"} <= {d["kind"] for d in docs}
    return docs


def ssa(kube_env, ns: str, docs: list[dict], *extra: str, check: bool = True):
    stream = "\n---\n".join(yaml.safe_dump(d) for d in docs)
    return kube_env.kubectl(*extra, "--server-side", f"--field-manager={GITOPS_MANAGER}", "-n", ns, "-f", "-",
                            input=stream, check=check)


def snapshot(kube_env, ns: str, docs: list[dict]) -> dict[tuple[str, str], dict]:
    out = {}
    for d in docs:
        obj = get_json(kube_env, d["kind"].lower(), d["metadata"]["name"], "-n", ns, "--show-managed-fields")
        mine = [m for m in obj["metadata"]["managedFields"] if m["manager"] == GITOPS_MANAGER]
        out[(d["kind"], d["metadata"]["name"])] = {
            "generation": obj["metadata"]["generation"], "spec": obj["spec"],
            "labels": obj["metadata"].get("labels"), "applied": mine,
            "others": [m for m in obj["metadata"]["managedFields"] if m["manager"] != GITOPS_MANAGER],
        }
    return out


def comparable(obj: dict) -> dict:
    meta = {k: v for k, v in obj["metadata"].items() if k not in ("resourceVersion", "managedFields")}
    return {k: v for k, v in {**obj, "metadata": meta}.items() if k != "status"}


def test_examples_applied_twice_by_a_gitops_tool_change_nothing(kube_env, kube_namespace, operator):
    ns = kube_namespace
    docs = gitops_documents("demo")
    first = ssa(kube_env, ns, docs, "apply")
    assert first.returncode == 0, first.stderr
    # Wait until the operator has reconciled each resource it reconciles (status for this generation).
    for d in docs:
        if d["kind"] == "KafkaTopic":
            continue  # the brokers' (none run here); the operator only reads them
        kind, name = d["kind"].lower(), d["metadata"]["name"]
        wait_for(f"{kind} {name} reconciled", lambda: (
            lambda o: o if (o.get("status") or {}).get("observedGeneration") == o["metadata"]["generation"] else None
        )(get_json(kube_env, kind, name, "-n", ns)), timeout=90)
    before = snapshot(kube_env, ns, docs)
    for (kind, name), state in before.items():
        for entry in state["others"]:  # the operator (kopf, status patches) never owns a spec field
            assert "f:spec" not in (entry.get("fieldsV1") or {}), (kind, name, entry["manager"], entry.get("subresource"))

    # The dry-run diff (what `kubectl diff --server-side` and Argo CD's server-side diff compute):
    # the object as the apply would leave it equals the live one, outside status (which the
    # operator may be rewriting meanwhile) and the bookkeeping fields every write moves.
    dry = json.loads(ssa(kube_env, ns, docs, "apply", "--dry-run=server", "-o", "json").stdout)
    for planned in dry.get("items", [dry]):
        live = get_json(kube_env, planned["kind"].lower(), planned["metadata"]["name"], "-n", ns)
        assert comparable(planned) == comparable(live), (planned["kind"], planned["metadata"]["name"])
    second = ssa(kube_env, ns, docs, "apply")
    assert second.returncode == 0 and "conflict" not in (second.stdout + second.stderr).lower(), second.stderr
    after = snapshot(kube_env, ns, docs)
    for key in before:
        # No write at all: the tool's managedFields entry (and its timestamp) is untouched.
        assert after[key]["applied"] == before[key]["applied"], key
        assert (after[key]["generation"], after[key]["spec"], after[key]["labels"]) == (
            before[key]["generation"], before[key]["spec"], before[key]["labels"]), key
