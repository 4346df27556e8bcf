"""The operator against a real control plane (kube-apiserver, etcd, controller-manager, scheduler,
kwok for fake kubelets), run in-process with kopf's KopfRunner.

    pytest -p flotilla.testenv.pytest_plugin -m kube tests/e2e/test_operator.py

Covers: the CRDs install and document themselves; invalid objects are refused by the API server
with the field named; a KafkaCluster becomes a StatefulSet and its companions, all owned by it;
pods get Ready and so does the status (with observedGeneration); a config change rolls brokers one
at a time, highest ordinal first, never more than one out of service over every pod watch event
(kwok marks pods Ready itself, no broker runs: a roll that waits for each broker's partitions to
regain a full ISR is tested on real pods, test_operator_pods.py); scaling 3 -> 5 -> 3 (also through the scale subresource); drift is repaired; a config
the broker would refuse rolls nothing; deletion garbage-collects every child; a scale-down stops
above brokers that still hold replicas (KafkaTopics with status written by hand) and reports
ScaleDownBlocked until they hold none; replication keys default to the fleet size and a min.insync.replicas above spec.replicas is refused naming the key.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from flotilla.testenv.ports import free_port  # noqa: F401  (re-exported to other test modules)
from flotilla.testenv.brokers.crds import install_crds, remove_crds
from flotilla.testenv.waiting import wait_for, wait_for_async

pytestmark = pytest.mark.kube

CRD_NAMES = ["kafkaclusters.flotilla.io", "clientquotas.flotilla.io", "recorddeletions.flotilla.io",
             "kafkatopics.flotilla.io", "kafkausers.flotilla.io"]
# kwok never pulls or runs images; on a real cluster use the image built from the Dockerfile.
IMAGE = os.environ.get("FLOTILLA_IMAGE", "flotilla:never-pulled")
SELECTOR = "app.kubernetes.io/name=flotilla,app.kubernetes.io/component=broker"
CHILDREN = [
    ("statefulset", "{name}-broker"),
    ("service", "{name}-brokers"),
    ("service", "{name}-bootstrap"),
    ("configmap", "{name}-config"),
    ("poddisruptionbudget", "{name}-broker"),
    ("serviceaccount", "{name}-broker"),
    ("role", "{name}-broker"),
    ("rolebinding", "{name}-broker"),
]


# ---------------------------------------------------------------------------------------------
# helpers


def get_json(kube_env, *args: str, check: bool = True) -> dict | None:
    proc = kube_env.kubectl("get", *args, "-o", "json", check=check)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)


def kafkacluster(name: str, namespace: str, **spec) -> dict:
    spec.setdefault("storage", {"type": "ephemeral", "size": "1Gi"})  # kwok has no volume provisioner
    return {
        "apiVersion": "flotilla.io/v1alpha1",
        "kind": "KafkaCluster",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def apply(kube_env, obj: dict, check: bool = True):
    return kube_env.kubectl("apply", "-f", "-", input=json.dumps(obj), check=check)


def condition(obj: dict | None, type_: str) -> dict:
    for c in ((obj or {}).get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return c
    return {}


def ready_at_generation(kube_env, ns: str, name: str, replicas: int):
    def check():
        kc = get_json(kube_env, "kafkacluster", name, "-n", ns)
        status = kc.get("status") or {}
        ready = condition(kc, "Ready")
        ok = (
            ready.get("status") == "True"
            and status.get("observedGeneration") == kc["metadata"]["generation"]
            and ready.get("observedGeneration") == kc["metadata"]["generation"]
            and status.get("readyReplicas") == replicas
        )
        return kc if ok else None
    return check


def broker_pods(kube_env, ns: str, name: str) -> list[dict]:
    pods = get_json(kube_env, "pods", "-n", ns, "-l", f"{SELECTOR},app.kubernetes.io/instance={name}")["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def pod_ready(pod: dict) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])


class PodWatch:
    """`kubectl get pods --watch` of one cluster's brokers in the background, into a file: every
    change in the API server's order, so that a check sees each intermediate state, not samples."""

    def __init__(self, kube_env, ns: str, name: str, path: Path) -> None:
        self.path = path
        with open(path, "wb") as out:
            self.proc = subprocess.Popen(
                [kube_env._tool("kubectl"), "get", "pods", "-n", ns, "-l", f"{SELECTOR},app.kubernetes.io/instance={name}",
                 "--watch", "-o", "json", "--output-watch-events"],
                stdout=out, stderr=subprocess.DEVNULL, env=kube_env.env)

    def events(self) -> list[dict]:
        text, pos, out = self.path.read_text(), 0, []
        decoder = json.JSONDecoder()
        while True:
            while pos < len(text) and text[pos].isspace():
                pos += 1
            try:
                event, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError:  # the end, or an event still being written
                return out
            out.append(event)

    def stop(self) -> list[dict]:
        self.proc.terminate()
        self.proc.wait(10)
        return self.events()


def most_out_at_once(events: list[dict], names: list[str], originals: set[str]) -> tuple[int, list[str]]:
    """The most brokers out of service at once through a roll, over every watch event: a broker is
    out from the moment its pod starts terminating (or is gone) until its replacement has been
    Ready once. A pod the roll has not touched, or a replacement already Ready, is not counted if
    it flaps NotReady: kwok's fake nodes can, on a loaded machine, and that is not the roll. The
    count starts once the watch's initial listing has shown every broker."""
    current: dict[str, dict] = {}
    listed = False
    ready_once: set[str] = set()
    worst, worst_at = 0, []
    for event in events:
        pod = event["object"]
        pname, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
        if event["type"] == "DELETED":
            if current.get(pname, {}).get("metadata", {}).get("uid") == uid:
                del current[pname]
        else:
            current[pname] = pod
            if pod_ready(pod) and not pod["metadata"].get("deletionTimestamp"):
                ready_once.add(uid)
        listed = listed or set(names) <= set(current)
        if not listed:
            continue
        out = [n for n in names if n not in current or current[n]["metadata"].get("deletionTimestamp")
               or (current[n]["metadata"]["uid"] not in originals and current[n]["metadata"]["uid"] not in ready_once)]
        if len(out) > worst:
            worst, worst_at = len(out), out
    return worst, worst_at


# ---------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def crds(kube_env):
    install_crds(kube_env)
    yield CRD_NAMES
    remove_crds(kube_env)  # the next module starts from a clean API server


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def operator(kube_env, crds, metrics_port):
    from kopf.testing import KopfRunner

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(kube_env.kubeconfig))
        mp.setenv("FLOTILLA_OPERATOR_RESYNC_SECONDS", "3")
        mp.setenv("FLOTILLA_OPERATOR_METRICS_ADDRESS", f"127.0.0.1:{metrics_port}")
        mp.setenv("FLOTILLA_BROKER_IMAGE", IMAGE)
        with KopfRunner(
            ["run", "--all-namespaces", "--standalone", "-m", "flotilla_operator.handlers"],
            timeout=60,
        ) as runner:
            yield runner
    assert runner.exception is None, runner.output[-4000:]
    assert runner.exit_code == 0, runner.output[-4000:]


# ---------------------------------------------------------------------------------------------
# the API: installed, documented, validated by the API server


def test_crds_are_established_and_documented(kube_env, crds):
    for crd in CRD_NAMES:
        got = get_json(kube_env, "crd", crd)
        assert any(c["type"] == "Established" and c["status"] == "True" for c in got["status"]["conditions"])
    assert "Kafka's key names" in explain(kube_env, "kafkacluster.spec.config")
    assert "default quota" in explain(kube_env, "clientquota.spec.entity.default")


def explain(kube_env, path: str, timeout: float = 60.0) -> str:
    """`kubectl explain`, retried: the API server publishes a new CRD's OpenAPI a little after
    the CRD is Established, and a loaded machine can stretch that to seconds."""
    deadline = time.monotonic() + timeout
    while True:
        proc = kube_env.kubectl("explain", path, check=False)
        if proc.returncode == 0 or time.monotonic() > deadline:
            assert proc.returncode == 0, f"kubectl explain {path}: {proc.stderr}"
            return proc.stdout
        time.sleep(1)


def kafka_user(name: str, *acls: dict) -> dict:
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": name, "namespace": "NS"},
            "spec": {"clusterRef": {"name": "demo"}, "authentication": {"type": "scram-sha-512"},
                     "authorization": {"acls": list(acls)}}}


@pytest.mark.parametrize(
    ("obj", "field", "words"),
    [
        (kafkacluster("bad", "NS", replicas=0), "spec.replicas", "greater than or equal to 1"),
        (kafkacluster("bad", "NS", config={"node.id": "1"}), "spec.config", "must not set node.id: a key the operator owns"),
        (kafkacluster("bad", "NS", config={"log.dirs": "/tmp"}), "spec.config", "must not set log.dirs"),
        (kafkacluster("bad", "NS", storage={"size": "a lot"}), "spec.storage.size", "should match"),
        (kafkacluster("bad", "NS", storage={"type": "tape"}), "spec.storage.type", "Unsupported value"),
        (kafkacluster("bad", "NS", listeners=[{"name": "PLAINTEXT", "port": 9404}]), "spec.listeners[0].port", "metrics port"),
        (kafkacluster("bad", "NS", listeners=[{"name": "A", "port": 9092}, {"name": "B", "port": 9092}]), "spec.listeners", "unique"),
        (kafkacluster("x" * 41, "NS"), "metadata.name", "at most 40"),
        (kafkacluster("bad", "NS", listeners=[{"name": "A", "port": 9093, "protocol": "SSL"},
                                             {"name": "B", "port": 9094, "protocol": "SASL_SSL", "authentication": "tls"}]),
         "spec.listeners[1].authentication", "authentication tls needs protocol SSL"),
        (kafkacluster("bad", "NS", listeners=[{"name": "A", "port": 9093, "protocol": "SSL", "authentication": "tls"}]),
         "spec.listeners", "spec.listeners[0].authentication must be unset"),
        (kafkacluster("bad", "NS", certificates={"validityDays": 30, "renewBeforeDays": 30}),
         "spec.certificates.renewBeforeDays", "must be less than validityDays"),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"clientId": "a", "default": True}, "producerByteRate": 1}},
            "spec.entity", "at most one of clientId or default",
        ),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"user": "a", "defaultUser": True}, "producerByteRate": 1}},
            "spec.entity", "at most one of user or defaultUser",
        ),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"defaultUser": False}, "producerByteRate": 1}},
            "spec.entity", "name a user (user or defaultUser: true), a client-id",
        ),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"user": "a"}, "requestPercentage": 0}},
            "spec.requestPercentage", "greater than 0",
        ),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"default": True}}},
            "spec", "producerByteRate, consumerByteRate or requestPercentage",
        ),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": 1, "timestamp": "2026-01-01T00:00:00Z"}}},
            "spec.before", "exactly one of offset, timestamp or consumedBy",
        ),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": 1}, "interval": "daily"}},
            "spec.interval", "should match",
        ),
        (
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": "bad", "namespace": "NS"},
             "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"consumedBy": ["g"]},
                      "keep": {"records": 1, "duration": "1h"}}},
            "spec.keep", "exactly one of records or duration",
        ),
        (
            kafka_user("bad", {"resource": {"type": "topic"}, "operations": ["Read"]}),
            "spec.authorization.acls[0].resource", "resource.name is required unless type is cluster",
        ),
        (
            kafka_user("bad", {"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}),
            "spec.authorization.acls[0].operations[0]", "Unsupported value",
        ),
        (kafka_user("flotilla-operator"), "metadata.name", "not flotilla-operator"),
    ],
    ids=["replicas", "node-id", "log-dirs", "size", "storage-type", "metrics-port", "dup-port", "long-name",
         "tls-auth-protocol", "tls-auth-first-listener", "certificate-renewal",
         "quota-entity", "quota-user-entity", "quota-empty-entity", "quota-request-percentage", "quota-rate",
         "deletion-before", "deletion-interval", "deletion-keep", "user-acl-name", "user-acl-operation",
         "user-operator-name"],
)
def test_api_server_rejects_invalid_objects_naming_the_field(kube_env, kube_namespace, crds, obj, field, words):
    obj = json.loads(json.dumps(obj).replace('"NS"', json.dumps(kube_namespace)))
    proc = kube_env.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
    assert proc.returncode != 0, proc.stdout
    assert field in proc.stderr, proc.stderr
    assert words in proc.stderr, proc.stderr


def test_storage_is_immutable(kube_env, kube_namespace, crds):
    apply(kube_env, kafkacluster("fixed", kube_namespace, replicas=1))
    proc = kube_env.kubectl(
        "patch", "kafkacluster", "fixed", "-n", kube_namespace, "--type=merge",
        "-p", json.dumps({"spec": {"storage": {"size": "2Gi"}}}), check=False,
    )
    assert proc.returncode != 0 and "spec.storage" in proc.stderr and "immutable" in proc.stderr
    proc = kube_env.kubectl(
        "patch", "kafkacluster", "fixed", "-n", kube_namespace, "--type=merge",
        "-p", json.dumps({"spec": {"storage": {"storageClassName": "fast"}}}), check=False,
    )
    assert proc.returncode != 0 and "immutable" in proc.stderr
    # deleteClaim (a StatefulSet retention policy, which may change) and anything else may change.
    kube_env.kubectl("patch", "kafkacluster", "fixed", "-n", kube_namespace, "--type=merge",
                     "-p", '{"spec": {"replicas": 2, "storage": {"deleteClaim": true}}}')
    assert get_json(kube_env, "kafkacluster", "fixed", "-n", kube_namespace)["spec"]["storage"]["deleteClaim"] is True


def test_defaults_are_applied_by_the_api_server(kube_env, kube_namespace, crds):
    apply(kube_env, {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
                     "metadata": {"name": "defaults", "namespace": kube_namespace}, "spec": {}})
    spec = get_json(kube_env, "kafkacluster", "defaults", "-n", kube_namespace)["spec"]
    assert spec["replicas"] == 3
    assert spec["storage"] == {"type": "persistent-claim", "size": "10Gi", "deleteClaim": False}
    assert spec["listeners"] == [{"name": "PLAINTEXT", "port": 9092, "protocol": "PLAINTEXT"}]
    assert spec["template"]["terminationGracePeriodSeconds"] == 120


# ---------------------------------------------------------------------------------------------
# the operator at work


# Longer than the sum of its waits (each child and each garbage collection waited for in turn),
# so that a wait, not pytest-timeout, names what did not happen.
@pytest.mark.timeout(2400)
def test_kafkacluster_lifecycle(kube_env, kube_namespace, operator, metrics_port, tmp_path):
    """The operator's side of a fleet's life. kwok marks pods Ready as soon as they are scheduled
    (no broker runs in them): the roll here shows the order and pace the roll gate and the
    StatefulSet give, not that a broker's partitions regain their ISR before the next one goes;
    that is tests/e2e/test_operator_pods.py, on real pods."""
    ns, name = kube_namespace, "demo"
    apply(kube_env, kafkacluster(name, ns, replicas=3, config={"log.retention.ms": "3600000"}))
    kc = get_json(kube_env, "kafkacluster", name, "-n", ns)
    uid = kc["metadata"]["uid"]

    # Every child exists, owned (as controller) by the KafkaCluster.
    for kind, pattern in CHILDREN:
        child_name = pattern.format(name=name)
        child = wait_for(f"{kind} {child_name}", lambda: get_json(kube_env, kind, child_name, "-n", ns, check=False))
        refs = child["metadata"].get("ownerReferences") or []
        assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in refs] == [("KafkaCluster", name, uid, True)], kind

    sts = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)
    assert sts["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE
    cm = get_json(kube_env, "configmap", f"{name}-config", "-n", ns)
    assert "log.retention.ms=3600000" in cm["data"]["server.properties"]
    headless = get_json(kube_env, "service", f"{name}-brokers", "-n", ns)
    assert headless["spec"]["clusterIP"] == "None"

    # Pods become Ready (kwok), and so does the KafkaCluster, for its current generation.
    kc = wait_for("KafkaCluster Ready", ready_at_generation(kube_env, ns, name, 3), timeout=120)
    status = kc["status"]
    assert status["bootstrapServers"] == f"{name}-bootstrap.{ns}.svc:9092"
    assert condition(kc, "Reconciling")["status"] == "False"
    assert condition(kc, "Degraded")["status"] == "False"
    assert status["configHash"] == sts["spec"]["template"]["metadata"]["annotations"]["flotilla.io/config-hash"]
    assert sorted(p["metadata"]["name"] for p in broker_pods(kube_env, ns, name)) == [f"{name}-broker-{i}" for i in range(3)]

    # What users look at: kubectl wait, and the printer columns.
    kube_env.kubectl("wait", "--for=condition=Ready", f"kafkacluster/{name}", "-n", ns, "--timeout=10s")
    table = kube_env.kubectl("get", "fkc", name, "-n", ns, "-o", "wide").stdout
    assert "BrokersReady" in table and f"{name}-bootstrap.{ns}.svc:9092" in table, table

    # A config change rolls the brokers, one at a time, highest ordinal first.
    old_hash = status["configHash"]
    uids_before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(kube_env, ns, name)}
    old_revision = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)["status"]["updateRevision"]
    watch = PodWatch(kube_env, ns, name, tmp_path / "pod-events.json")
    try:
        wait_for("the pod watch to list the three brokers",
                 lambda: {e["object"]["metadata"]["name"] for e in watch.events()},
                 until=lambda seen: seen >= set(uids_before), timeout=60)
        kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge",
                         "-p", json.dumps({"spec": {"config": {"log.retention.ms": "7200000"}}}))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            sts = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)
            st = sts.get("status") or {}
            new_revision = st.get("updateRevision")
            pods = broker_pods(kube_env, ns, name)
            if new_revision and new_revision != old_revision:
                updated = sorted(int(p["metadata"]["name"].rsplit("-", 1)[1]) for p in pods
                                 if p["metadata"]["labels"].get("controller-revision-hash") == new_revision)
                # The roll gate opens one ordinal at a time, from the highest down.
                assert updated == list(range(3 - len(updated), 3)), updated
                if (st.get("currentRevision") == new_revision and st.get("updatedReplicas") == 3
                        and st.get("readyReplicas") == 3):
                    break
            time.sleep(0.2)
        else:
            pytest.fail(f"roll did not finish: {sts.get('status')}")
    finally:
        events = watch.stop()
    # Never more than one broker out of service, over every change the API server made to the pods
    # (Parallel pod management: only the roll gate and the StatefulSet's pace keep it to one).
    worst, out = most_out_at_once(events, sorted(uids_before), set(uids_before.values()))
    assert worst == 1, f"{worst} brokers out at once during the roll: {out} ({len(events)} pod events)"
    kc = wait_for("Ready after the roll", ready_at_generation(kube_env, ns, name, 3), timeout=60)
    assert kc["status"]["configHash"] != old_hash
    cm = get_json(kube_env, "configmap", f"{name}-config", "-n", ns)
    assert "log.retention.ms=7200000" in cm["data"]["server.properties"]
    rolled = broker_pods(kube_env, ns, name)
    assert all(p["metadata"]["labels"]["controller-revision-hash"] == new_revision for p in rolled)
    # Every broker was replaced (restarted with the new configuration).
    assert not {p["metadata"]["uid"] for p in rolled} & set(uids_before.values())
    uids_rolled = {p["metadata"]["name"]: p["metadata"]["uid"] for p in rolled}

    # Scale 3 -> 5 through the spec, then 5 -> 3 through the scale subresource.
    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 5}}')
    wait_for("5 brokers Ready", ready_at_generation(kube_env, ns, name, 5), timeout=120)
    scaled = {p["metadata"]["name"]: p["metadata"]["uid"] for p in broker_pods(kube_env, ns, name)}
    assert sorted(scaled) == [f"{name}-broker-{i}" for i in range(5)]
    # Scaling adds brokers without restarting the others (replicas are not part of the config).
    assert all(scaled[pod] == uid for pod, uid in uids_rolled.items())
    kube_env.kubectl("scale", "kafkacluster", name, "-n", ns, "--replicas=3")
    wait_for("3 brokers Ready", ready_at_generation(kube_env, ns, name, 3), timeout=120)
    wait_for("2 brokers gone", lambda: len(broker_pods(kube_env, ns, name)) == 3)
    assert get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)["spec"]["replicas"] == 3

    # Drift: a deleted child comes back, an edited one is put right.
    kube_env.kubectl("delete", "service", f"{name}-bootstrap", "-n", ns)
    wait_for("bootstrap Service re-created",
             lambda: get_json(kube_env, "service", f"{name}-bootstrap", "-n", ns, check=False), timeout=30)
    kube_env.kubectl("patch", "configmap", f"{name}-config", "-n", ns, "--type=merge",
                     "-p", json.dumps({"data": {"server.properties": "tampered=1\n"}}))
    wait_for("ConfigMap restored", lambda: "log.retention.ms=7200000" in
             get_json(kube_env, "configmap", f"{name}-config", "-n", ns)["data"]["server.properties"], timeout=30)

    # The operator's metrics counted all this.
    def scrape() -> str:
        return urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=5).read().decode()

    body = scrape()
    line = next(l for l in body.splitlines()
                if l.startswith('flotilla_operator_reconcile_total{kind="KafkaCluster",result="success"}'))
    assert float(line.split()[-1]) >= 3
    assert 'flotilla_operator_reconcile_duration_seconds_count{kind="KafkaCluster"}' in body
    # The gauge counts the three Ready brokers, as the status does (both may lag the pods a moment).
    gauge = f'flotilla_operator_ready_brokers{{name="{name}",namespace="{ns}"}}'
    wait_for("the ready-brokers gauge to show 3 for 3 Ready brokers",
             lambda: [l for l in scrape().splitlines() if l.startswith(gauge)],
             until=lambda lines: lines == [f"{gauge} 3.0"], timeout=30)
    assert get_json(kube_env, "kafkacluster", name, "-n", ns)["status"]["readyReplicas"] == 3

    # Deleting the KafkaCluster garbage-collects every child (the controller-manager's GC).
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns, "--wait=true", "--timeout=60s")
    for kind, pattern in CHILDREN:
        child_name = pattern.format(name=name)
        wait_for(f"{kind} {child_name} garbage-collected",
                 lambda: get_json(kube_env, kind, child_name, "-n", ns, check=False) is None, timeout=90)
    wait_for("broker pods gone", lambda: not broker_pods(kube_env, ns, name), timeout=90)


def test_config_the_broker_refuses_rolls_nothing(kube_env, kube_namespace, operator):
    ns, name = kube_namespace, "typo"
    apply(kube_env, kafkacluster(name, ns, replicas=1, config={"log.retention.hour": "5"}))
    kc = wait_for("InvalidConfig reported", lambda: (
        lambda got: got if condition(got, "Degraded").get("reason") == "InvalidConfig" else None
    )(get_json(kube_env, "kafkacluster", name, "-n", ns)))
    assert condition(kc, "Ready")["status"] == "False"
    assert "log.retention.hour" in condition(kc, "Ready")["message"]
    assert get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns, check=False) is None
    # Fixing the spec recovers.
    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=json",
                     "-p", json.dumps([{"op": "replace", "path": "/spec/config", "value": {"log.retention.ms": "5"}}]))
    wait_for("Ready once fixed", ready_at_generation(kube_env, ns, name, 1), timeout=90)


def test_persistent_storage_renders_claim_templates(kube_env, kube_namespace, operator):
    ns = kube_namespace
    apply(kube_env, kafkacluster("disks", ns, replicas=1,
                                 storage={"type": "persistent-claim", "size": "5Gi", "deleteClaim": True}))
    sts = wait_for("StatefulSet", lambda: get_json(kube_env, "statefulset", "disks-broker", "-n", ns, check=False))
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    # The StatefulSet controller creates the claim (no provisioner here: it stays Pending) and, as
    # deleteClaim asks, makes the StatefulSet its owner so that it goes with the cluster.
    pvc = wait_for("claim data-disks-broker-0",
                   lambda: get_json(kube_env, "pvc", "data-disks-broker-0", "-n", ns, check=False))
    wait_for("claim owned by the StatefulSet", lambda: any(
        r["kind"] == "StatefulSet" and r["name"] == "disks-broker"
        for r in (get_json(kube_env, "pvc", "data-disks-broker-0", "-n", ns)["metadata"].get("ownerReferences") or [])
    ), timeout=30)
    assert pvc["spec"]["resources"]["requests"]["storage"] == "5Gi"
    # Changing deleteClaim changes the StatefulSet's retention policy in place.
    kube_env.kubectl("patch", "kafkacluster", "disks", "-n", ns, "--type=merge",
                     "-p", '{"spec": {"storage": {"deleteClaim": false}}}')
    wait_for("retention policy Retain", lambda: get_json(kube_env, "statefulset", "disks-broker", "-n", ns)
             ["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain", timeout=30)


def test_clientquota_and_recorddeletion_wait_for_their_cluster(kube_env, kube_namespace, operator):
    ns = kube_namespace
    quota = {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "etl", "namespace": ns},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"clientId": "etl"},
                      "producerByteRate": 1048576, "consumerByteRate": 2097152}}
    deletion = {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": "purge", "namespace": ns},
                "spec": {"clusterRef": {"name": "demo"}, "topic": "intermediate",
                         "before": {"consumedBy": ["spark-stage-2"]}, "interval": "10m"}}
    for obj in (quota, deletion):
        apply(kube_env, obj)
    for kind, name, reason, says in (("clientquota", "etl", "Pending", "KafkaCluster demo does not exist"),
                                     ("recorddeletion", "purge", "ClusterNotReady", "KafkaCluster demo does not exist")):
        got = wait_for(f"{kind} status", lambda: (
            lambda o: o if condition(o, "Ready").get("reason") == reason else None
        )(get_json(kube_env, kind, name, "-n", ns)))
        ready = condition(got, "Ready")
        assert ready["status"] == "False" and says in ready["message"]
        assert got["status"]["observedGeneration"] == got["metadata"]["generation"]


async def test_status_counts_registered_brokers_and_names_the_controller(kube_env, kube_namespace, operator, monkeypatch):
    """The brokers' Leases (written here by the brokers' own metadata store) show in the status."""
    import asyncio

    from broker.metadata.kube_store import KubernetesMetadataStore
    from tests.support.metadata_contract import registration

    ns, name = kube_namespace, "leased"
    apply(kube_env, kafkacluster(name, ns, replicas=2))
    monkeypatch.setenv("KUBECONFIG", str(kube_env.kubeconfig))
    stores = [KubernetesMetadataStore(cluster_id="cid", cluster_name=name, namespace=ns, lease_duration_s=15)
              for _ in range(2)]

    async def status_becomes(check, what):
        # kubectl in a thread: the stores renew their Leases on this event loop meanwhile.
        async def status():
            kc = await asyncio.to_thread(get_json, kube_env, "kafkacluster", name, "-n", ns)
            return (kc or {}).get("status") or {}
        return await wait_for_async(f"status showing {what}", status, until=check, timeout=60)

    try:
        for node, s in enumerate(stores):
            await s.start()
            await s.register_broker(registration(node, 9092 + node))
        assert await stores[1].campaign(1)
        await status_becomes(lambda st: st.get("registeredBrokers") == 2 and st.get("controller") == 1,
                             "2 brokers and controller 1")
        wide = (await asyncio.to_thread(kube_env.kubectl, "get", "kafkacluster", name, "-n", ns, "-o", "wide",
                                        "--no-headers")).stdout
        assert wide.split()[3] == "2"  # the Registered column
        await stores[1].close()  # a clean stop: its Lease is deleted and the controller Lease released
        await status_becomes(lambda st: st.get("registeredBrokers") == 1 and "controller" not in st,
                             "1 broker and no controller")
    finally:
        for s in stores:
            await s.close()


def kafkatopic(cluster: str, name: str, replicas: list[list[int]]) -> dict:
    """A KafkaTopic with its status, as the brokers write it (no status subresource: one object)."""
    return {
        "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
        "metadata": {"name": name, "labels": {"flotilla.io/cluster": cluster}},
        "spec": {"topicName": name, "partitions": len(replicas), "replicas": len(replicas[0])},
        "status": {"topicId": "AAAAAAAAAAAAAAAAAAAAAQ",
                   "assignment": [{"leader": r[0], "leaderEpoch": 0, "replicas": r, "isr": r} for r in replicas]},
    }


def write_topic(kube_env, ns: str, obj: dict) -> None:
    """Create the KafkaTopic if absent, then write its status through the status subresource, as
    brokers do (the API server drops status from a create and from writes of the resource)."""
    name = obj["metadata"]["name"]
    if kube_env.kubectl("get", "kafkatopic", name, "-n", ns, check=False).returncode != 0:
        kube_env.kubectl("create", "-n", ns, "-f", "-", input=json.dumps(obj))
    current = get_json(kube_env, "kafkatopic", name, "-n", ns)
    kube_env.kubectl("replace", "--subresource=status", "-n", ns, "-f", "-",
                     input=json.dumps({**obj, "metadata": current["metadata"]}))


@pytest.mark.timeout(450)  # longer than the sum of its waits (364 s)
def test_scale_down_waits_for_the_removed_brokers_to_hold_no_replicas(kube_env, kube_namespace, operator):
    ns, name = kube_namespace, "shrink"
    apply(kube_env, kafkacluster(name, ns, replicas=5))
    wait_for("5 brokers Ready", ready_at_generation(kube_env, ns, name, 5), timeout=120)
    # Brokers 3 and 4 hold replicas; a topic of another cluster on "broker 4" does not count.
    write_topic(kube_env, ns, kafkatopic(name, "orders", [[0, 3], [1, 4], [2, 0]]))
    write_topic(kube_env, ns, kafkatopic("other", "elsewhere", [[4]]))

    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 3}}')

    def blocked_condition():
        return condition(get_json(kube_env, "kafkacluster", name, "-n", ns), "ScaleDownBlocked") or None
    c = wait_for("ScaleDownBlocked", blocked_condition, timeout=60)
    assert (c["status"], c["reason"]) == ("True", "ReplicasOnRemovedBrokers")
    assert c["message"].startswith("not removing broker(s) 3, 4: they still hold replicas of 2 partition(s) (orders-0, orders-1)"), c
    time.sleep(4)  # past a resync (3 s): still held
    assert get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)["spec"]["replicas"] == 5
    assert len(broker_pods(kube_env, ns, name)) == 5
    kc = get_json(kube_env, "kafkacluster", name, "-n", ns)
    assert (condition(kc, "Reconciling")["status"], condition(kc, "Reconciling")["reason"]) == ("True", "ScaleDownBlocked")

    # Partition 1 moves off broker 4: the StatefulSet may lose broker 4, not broker 3.
    write_topic(kube_env, ns, kafkatopic(name, "orders", [[0, 3], [1, 2], [2, 0]]))
    wait_for("StatefulSet at 4", lambda: get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)["spec"]["replicas"] == 4,
             timeout=30)
    c = wait_for("blocked on broker 3 only", lambda: (lambda c: c if c and c["message"].startswith(
        "not removing broker(s) 3:") else None)(blocked_condition()), timeout=30)
    assert "orders-0" in c["message"] and "keeping 4 brokers" in c["message"]

    # Deleting the topic frees broker 3: scaled down to the spec, the condition gone, Ready.
    kube_env.kubectl("delete", "kafkatopic", "orders", "-n", ns)
    kc = wait_for("3 brokers Ready", ready_at_generation(kube_env, ns, name, 3), timeout=120)
    assert condition(kc, "ScaleDownBlocked") == {}
    assert get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)["spec"]["replicas"] == 3
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns)


def test_replication_defaults_and_a_min_isr_the_fleet_cannot_meet(kube_env, kube_namespace, operator):
    ns, name = kube_namespace, "repl"
    apply(kube_env, kafkacluster(name, ns, replicas=3))
    wait_for("3 brokers Ready", ready_at_generation(kube_env, ns, name, 3), timeout=120)
    props = get_json(kube_env, "configmap", f"{name}-config", "-n", ns)["data"]["server.properties"].splitlines()
    assert {"default.replication.factor=3", "offsets.topic.replication.factor=3", "min.insync.replicas=2"} <= set(props)
    sts_before = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)
    # More in-sync replicas than brokers: refused naming the key, and nothing changes.
    kube_env.kubectl("patch", "kafkacluster", name, "-n", ns, "--type=merge",
                     "-p", json.dumps({"spec": {"config": {"min.insync.replicas": "4"}}}))
    kc = wait_for("InvalidSpec reported", lambda: (
        lambda got: got if condition(got, "Degraded").get("reason") == "InvalidSpec" else None
    )(get_json(kube_env, "kafkacluster", name, "-n", ns)))
    assert "spec.config.min.insync.replicas=4 exceeds spec.replicas (3)" in condition(kc, "Degraded")["message"]
    sts_after = get_json(kube_env, "statefulset", f"{name}-broker", "-n", ns)
    assert sts_after["spec"]["template"] == sts_before["spec"]["template"]
    kube_env.kubectl("delete", "kafkacluster", name, "-n", ns)
