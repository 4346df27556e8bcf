"""The operator as users run it: installed in the cluster from install/flotilla-all-namespaces.yaml
(the one-command install that manages every namespace: each test has a namespace of its own), on
the real test node (kubelet, containerd, kube-proxy, CoreDNS), managing a KafkaCluster of three
broker pods, and running RecordDeletions through its AdminClient over the pod network.

    flock /tmp/flot/node.lock .venv/bin/pytest tests/e2e/test_operator_in_cluster.py -x -q

Why in the cluster: the RecordDeletion's AdminClient bootstraps from the cluster's Service and then
dials the brokers' advertised `<pod>.<headless>.<ns>.svc` names, which only the cluster DNS
resolves, so an operator on the host (test_operator_pods.py's KopfRunner) cannot reach them. The
manifest is applied as shipped except for the image (the test image, imagePullPolicy Never: there
is no registry) and a shorter resync; the module removes the operator again at its end (the next
module may run its own operator on the host) and leaves the CRDs, which every module re-applies.

What it shows: the Deployment's two replicas both Ready by the kubelet's probes, one holding the
election Lease (test_operator_rollout.py rolls them); its ServiceAccount may do what the operator does (the development
example, examples/kafkacluster-dev.yaml applied as written, goes Ready; RecordDeletions get their
status); a `consumedBy` RecordDeletion on `interval: 30s` keeps a
topic that one client produces to and consumes from continuously (committing as it goes) bounded,
and every record produced is consumed (nothing the group had not committed was deleted: the group
consumes with auto.offset.reset=error); the offset and timestamp policies delete exactly what they
name; bad specs (topic, partition, group) get a condition naming the field; re-applying changes
nothing. Then the rest of docs/quickstart.md: the topic and quota examples as written reach Ready,
kcat produces and consumes through the bootstrap Service, every metric the shipped dashboards and
alerts use is exported by the pods, and deleting the KafkaCluster leaves only what is meant to
outlive it. Last, the persistent three-broker example (examples/kafkacluster.yaml) as written: Ready
on claims, acknowledged records kept across a broker pod's replacement, claims kept on deletion.
Then an elastic fleet (issue 24): three brokers on claims grow to five and shrink to three under a
producer and a group; leaders and replicas spread evenly, the removed brokers' claims deleted.
The clients run on the host with the cluster's DNS (tests/support/cluster_dns.py).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import subprocess
import sys
import time
import urllib.request
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from tests.e2e import test_operator_pods
from tests.e2e.test_operator_pods import condition, get_json
from tests.support import cluster_dns, monitoring_names
from flotilla.testenv.waiting import wait_for

pytestmark = [pytest.mark.kube, pytest.mark.kube_node, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
# Not install/flotilla.yaml, which manages only `flotilla`: the tests' fleets each have a namespace.
MANIFEST = ROOT / "install" / "flotilla-all-namespaces.yaml"
EXAMPLES = ROOT / "examples"
OPERATOR_NS = "flotilla"
NAME = "demo"  # the examples' cluster (examples/kafkacluster-dev.yaml)
READY_TIMEOUT = 300
T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: the first record's CreateTime in the timestamp test


#: Operator log lines that say nothing about a failure (a Lease renewed, a probe answered).
_QUIET = ("Handler 'lease_event' succeeded", "GET /healthz", "Activity 'kafkaclusters' succeeded")


OPERATOR_PODS = "app.kubernetes.io/name=flotilla,app.kubernetes.io/component=operator"


def operator_log(env, tail: int = 200) -> str:
    """The last `tail` log lines of both operator replicas (each line prefixed with its pod) without
    the routine ones (tail=-1: their whole logs, as they are)."""
    args = ["logs", "-l", OPERATOR_PODS, "-n", OPERATOR_NS, "--prefix", "--max-log-requests=4"]
    if tail < 0:
        return env.kubectl(*args, "--tail=-1", check=False).stdout
    lines = env.kubectl(*args, f"--tail={tail * 20}", check=False).stdout.splitlines()
    return "\n".join([line for line in lines if not any(q in line for q in _QUIET)][-tail:])


def leader_pod(env) -> dict:
    """The operator replica holding the election Lease (its holderIdentity starts with the pod's name)."""
    holder = get_json(env, "lease", "flotilla-operator", "-n", OPERATOR_NS)["spec"].get("holderIdentity") or ""
    pods = get_json(env, "pods", "-n", OPERATOR_NS, "-l", OPERATOR_PODS)["items"]
    (pod,) = [p for p in pods if holder.startswith(p["metadata"]["name"] + "_")]
    return pod


def topics_report(env, ns: str) -> str:
    """Each KafkaTopic of `ns`: its Ready condition and the partitions whose replica count is not
    its replication factor or that are being reassigned (what a rebalance plans from)."""
    out = []
    for t in (get_json(env, "kafkatopics", "-n", ns, check=False) or {}).get("items") or ():
        st = t.get("status") or {}
        rf = st.get("replicationFactor")
        odd = [(i, p) for i, p in enumerate(st.get("assignment") or ())
               if len(p.get("replicas") or ()) != rf or p.get("addingReplicas") or p.get("removingReplicas")]
        out.append(f"{t['metadata']['name']}: rf {rf}, {len(st.get('assignment') or ())} partition(s), "
                   f"Ready {condition(t, 'Ready').get('status')}; unusual: {odd[:10]}")
    return "\n".join(out)


def broker_logs(env, ns: str, tail: int = 120) -> str:
    out = []
    for pod in (get_json(env, "pods", "-n", ns, check=False) or {}).get("items") or ():
        name = pod["metadata"]["name"]
        if "-broker-" in name:
            log = env.kubectl("logs", name, "-n", ns, f"--tail={tail}", check=False).stdout
            out.append(f"--- broker pod {name} (last {tail} lines) ---\n{log}")
    return "\n".join(out)


@contextlib.contextmanager
def explained(env, ns: str | None = None):
    """On failure, print the operator's log (it runs in a pod: the plugin's report cannot see it)
    and, with `ns`, the KafkaTopics' partitions and the broker pods' logs of that namespace."""
    try:
        yield
    except BaseException:
        print("--- operator log ---\n" + operator_log(env))
        if ns is not None:
            print(f"--- KafkaTopics of {ns} ---\n" + topics_report(env, ns))
            print(broker_logs(env, ns))
        raise


# --- the install manifest, as a user applies it -------------------------------------------------


def manifest_for(image: str) -> list[dict]:
    """The install manifest with the operator (and the brokers it creates) on `image`, which only
    the node has: pull policy Never. A resync of 5s instead of 60s keeps the module short."""
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["image"], container["imagePullPolicy"] = image, "Never"
    container["args"] = [a if not a.startswith("--resync-seconds=") else "--resync-seconds=5" for a in container["args"]]
    env = {e["name"]: e for e in container["env"]}
    env["FLOTILLA_BROKER_IMAGE"]["value"] = image
    env["FLOTILLA_BROKER_IMAGE_PULL_POLICY"]["value"] = "Never"
    return docs


#: What the module removes at its end: the operator, its account and RBAC (not the CRDs and
#: admission policies, which the other modules apply too).
REMOVED_KINDS = {"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Namespace"}


@pytest.fixture(scope="module")
def installed(kube_node_env):
    """The operator's Deployment from the install manifest, rolled out; removed at module end."""
    env = kube_node_env
    docs = manifest_for(env.image)
    env.kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=yaml.safe_dump_all(docs))
    try:
        env.kubectl("rollout", "status", "deployment/flotilla-operator", "-n", OPERATOR_NS, "--timeout=180s",
                    timeout=200)
    except BaseException:
        print(env.kubectl("get", "pods", "-n", OPERATOR_NS, "-o", "yaml", check=False).stdout[-4000:])
        print(operator_log(env))
        _uninstall(env, docs)
        raise
    yield docs
    _uninstall(env, docs)


def _uninstall(env, docs: list[dict]) -> None:
    for doc in docs:
        if doc["kind"] in REMOVED_KINDS and doc["kind"] != "Namespace":
            where = ["-n", doc["metadata"]["namespace"]] if doc["metadata"].get("namespace") else []
            env.kubectl("delete", doc["kind"].lower(), doc["metadata"]["name"], *where, "--ignore-not-found",
                        check=False)
    env.kubectl("delete", "namespace", OPERATOR_NS, "--ignore-not-found", "--timeout=120s", check=False, timeout=150)


def cluster_ready(env, ns: str, replicas: int = 3):
    return test_operator_pods.cluster_ready(env, ns, replicas, name=NAME)


@pytest.fixture(scope="module")
def fleet(kube_node_env, installed):
    """examples/kafkacluster-dev.yaml applied as written (three brokers, ephemeral storage): its
    pods, which the in-cluster operator created, Ready. Deleted before the operator is removed."""
    env = kube_node_env
    ns = f"incluster-{uuid.uuid4().hex[:8]}"
    env.kubectl("create", "namespace", ns)
    env.kubectl("apply", "-n", ns, "-f", str(EXAMPLES / "kafkacluster-dev.yaml"))
    try:
        with explained(env, ns):
            wait_for("KafkaCluster Ready, managed by the in-cluster operator", cluster_ready(env, ns),
                     timeout=READY_TIMEOUT)
    except BaseException:
        for pod in get_json(env, "pods", "-n", ns)["items"]:
            print(pod["metadata"]["name"], json.dumps(pod.get("status", {}))[:2000])
        _remove_fleet(env, ns)
        raise
    yield ns
    _remove_fleet(env, ns)


def _remove_fleet(env, ns: str) -> None:
    for kind in ("recorddeletion", "clientquota", "kafkacluster"):
        env.kubectl("delete", kind, "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False, timeout=150)
    env.kubectl("delete", "namespace", ns, "--wait=false", check=False)


# --- clients with the cluster's DNS -------------------------------------------------------------

CLIENT = r'''
import json, os, sys, time
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
action, bootstrap, topic = sys.argv[1:4]
args = sys.argv[4:]
EXTRA = json.loads(os.environ.get("CLIENT_CONF") or "{}")  # security settings, added to every client's
if action == "create":
    admin = AdminClient({"bootstrap.servers": bootstrap, **EXTRA})
    admin.create_topics([NewTopic(topic, num_partitions=int(args[0]), replication_factor=-1)])[topic].result(60)
    print("{}")
elif action == "produce":   # partition count [first CreateTime ms: record i has it + i seconds]
    partition, count = int(args[0]), int(args[1])
    first = int(args[2]) if len(args) > 2 else None
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, **EXTRA, "acks": "all", "enable.idempotence": True})
    for i in range(count):
        kw = {} if first is None else {"timestamp": first + 1000 * i}
        p.produce(topic, f"r{i}".encode(), partition=partition,
                  on_delivery=lambda err, msg: err and errors.append(str(err)), **kw)
    print(json.dumps({"errors": errors, "unflushed": p.flush(60)}))
elif action == "commit":    # group partition:offset ...
    c = Consumer({"bootstrap.servers": bootstrap, **EXTRA, "group.id": args[0], "enable.auto.commit": False})
    c.commit(offsets=[TopicPartition(topic, int(p), int(o)) for p, o in (a.split(":") for a in args[1:])],
             asynchronous=False)
    c.close()
    print("{}")
elif action == "offsets":   # partitions [group]: {"watermarks": {p: [start, end]}, "committed": {p: offset}}
    parts = range(int(args[0]))
    c = Consumer({"bootstrap.servers": bootstrap, **EXTRA, "group.id": args[1] if len(args) > 1 else "offsets-probe"})
    out = {"watermarks": {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in parts}}
    if len(args) > 1:
        held = c.committed([TopicPartition(topic, p) for p in parts], timeout=30)
        out["committed"] = {tp.partition: tp.offset for tp in held}
        out["committed_errors"] = {tp.partition: str(tp.error) for tp in held if tp.error}
    c.close()
    print(json.dumps(out))
elif action == "brokers":   # {node id: "host:port"} from Metadata
    md = AdminClient({"bootstrap.servers": bootstrap, **EXTRA}).list_topics(timeout=30)
    print(json.dumps({b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}))
elif action == "placement":   # {partition: [leader, replicas]} from Metadata
    md = AdminClient({"bootstrap.servers": bootstrap, **EXTRA}).list_topics(topic, timeout=30).topics[topic]
    print(json.dumps({p: [m.leader, list(m.replicas)] for p, m in md.partitions.items()}))
elif action == "ledger":    # group stop-file: produce and consume (committing) until stop-file exists
    group, stop_file = args[0], args[1]
    RATE = 50  # records a second
    delivered, errors, consumed, consumer_errors, where = [], [], [], [], {}
    p = Producer({"bootstrap.servers": bootstrap, **EXTRA, "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    # The group starts committed at 0 and never resets by itself: a record deleted before the group
    # consumed it would be an OFFSET_OUT_OF_RANGE error here, not a silent jump.
    c = Consumer({"bootstrap.servers": bootstrap, **EXTRA, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "error", **({"debug": os.environ["LEDGER_DEBUG"]} if os.environ.get("LEDGER_DEBUG") else {})})
    c.subscribe([topic])
    started = last_commit = time.monotonic()
    sent, commits, drain_until = 0, 0, None
    def on_delivery(err, msg):
        (errors.append(str(err)) if err else delivered.append(msg.value().decode()))
        if not err:
            where[msg.value().decode()] = msg.partition()
    while True:
        if drain_until is None and os.path.exists(stop_file):
            p.flush(60)
            drain_until = time.monotonic() + 90
        if drain_until is None:
            while sent < RATE * (time.monotonic() - started):
                p.produce(topic, f"v-{sent}".encode(), on_delivery=on_delivery)
                sent += 1
            p.poll(0)
        for m in c.consume(num_messages=500, timeout=0.05):
            if m.error():
                consumer_errors.append(str(m.error()))
            else:
                consumed.append(m.value().decode())
        if time.monotonic() - last_commit >= 1.0:
            try:
                c.commit(asynchronous=False)
                commits += 1
            except KafkaException:
                pass  # nothing new to commit
            last_commit = time.monotonic()
        if drain_until is not None and (len(set(consumed)) >= len(delivered) or time.monotonic() > drain_until):
            break
    try:
        c.commit(asynchronous=False)
    except KafkaException:
        pass
    positions = {tp.partition: tp.offset for tp in c.position(c.assignment())}
    c.close()
    print(json.dumps({"sent": sent, "delivered": delivered, "errors": errors, "consumed": consumed,
                      "consumer_errors": consumer_errors[:20], "commits": commits,
                      "partition_of": where, "positions": positions}))
'''


def client_argv(env, ns: str, action: str, topic: str, *args: str, port: int = 9092) -> list[str]:
    bootstrap = f"{NAME}-bootstrap.{ns}.svc:{port}"
    return cluster_dns.argv(env, ns, [sys.executable, "-c", CLIENT, action, bootstrap, topic, *args])


def client_env(conf: dict | None) -> dict[str, str] | None:
    """The environment that gives the client script `conf` (security settings) for every client."""
    return None if conf is None else {**os.environ, "CLIENT_CONF": json.dumps(conf)}


def client(env, ns: str, action: str, topic: str, *args: str, timeout: float = 180, conf: dict | None = None,
           port: int = 9092):
    proc = subprocess.run(client_argv(env, ns, action, topic, *args, port=port), capture_output=True, text=True,
                          timeout=timeout, env=client_env(conf))
    assert proc.returncode == 0, f"client {action} {topic} {args}: {proc.stdout}\n{proc.stderr[-3000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def produce(env, ns: str, topic: str, partition: int, count: int, *first_ts_ms: int) -> None:
    result = client(env, ns, "produce", topic, str(partition), str(count), *map(str, first_ts_ms))
    assert result == {"errors": [], "unflushed": 0}, result


def watermarks(env, ns: str, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """{partition: (log start, end offset)} as the leaders answer ListOffsets."""
    got = client(env, ns, "offsets", topic, str(partitions))["watermarks"]
    return {int(p): tuple(v) for p, v in got.items()}


def finished_ledger(ledger: subprocess.Popen, stop_file: Path) -> tuple[dict, str]:
    """Stop a running `ledger` client and return (its result, its log), once it is known that no
    produce failed, something was sent, the consumer saw no error and read no record twice."""
    stop_file.touch()
    out, err = ledger.communicate(timeout=180)
    assert ledger.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    delivered, consumed = result["delivered"], result["consumed"]
    assert result["errors"] == [] and len(delivered) == result["sent"] > 0, (result["errors"][:5], result["sent"])
    assert result["consumer_errors"] == [], result["consumer_errors"]
    assert len(consumed) == len(set(consumed)), "a record was read twice"
    return result, err


def deletion(name: str, ns: str, topic: str, before: dict, **spec) -> dict:
    return {"apiVersion": "flotilla.io/v1alpha1", "kind": "RecordDeletion", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterRef": {"name": NAME}, "topic": topic, "before": before, **spec}}


def apply(env, obj: dict) -> str:
    return env.kubectl("apply", "-f", "-", input=json.dumps(obj)).stdout


def status_of(env, ns: str, name: str, reason: str, check=None, timeout: float = 120):
    """The RecordDeletion once its Ready reason is `reason` for its current generation (and check(obj))."""
    def current():
        obj = get_json(env, "recorddeletion", name, "-n", ns, check=False)
        ready = condition(obj, "Ready")
        if ready.get("reason") != reason or ready.get("observedGeneration") != obj["metadata"]["generation"]:
            return None
        return obj if check is None or check(obj) else None
    with explained(env, ns):
        return wait_for(f"recorddeletion {name}: {reason}", current, timeout=timeout)


def rows(obj) -> dict[int, dict]:
    return {r["partition"]: r for r in obj["status"].get("partitions") or ()}


# --- tests --------------------------------------------------------------------------------------


def test_operator_runs_in_the_cluster_from_the_install_manifest(kube_node_env, installed, fleet):
    env = kube_node_env
    pods = get_json(env, "pods", "-n", OPERATOR_NS, "-l", "app.kubernetes.io/component=operator")["items"]
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        spec = pod["spec"]
        assert spec["serviceAccountName"] == "flotilla-operator" and spec["containers"][0]["image"] == env.image
        # Both Ready (the kubelet's /readyz probe): the leader and a standby able to take over.
        assert condition(pod, "Ready").get("status") == "True", pod["metadata"]["name"]
    log = operator_log(env, tail=-1)
    assert log.count("in-cluster (service account)") == 2, log[-3000:]
    leader = leader_pod(env)["metadata"]["name"]
    assert f"{leader}_" in log and "leads; starting the operator" in log and "standing by" in log, log[-3000:]
    # It created the brokers with the image it was told to use.
    sts = get_json(env, "statefulset", f"{NAME}-broker", "-n", fleet)
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == env.image


def test_consumed_by_keeps_a_busy_topic_bounded_and_deletes_nothing_unconsumed(kube_node_env, fleet):
    """One client produces and consumes continuously, committing every second; the RecordDeletion
    (consumedBy its group, every 30s) runs until it has deleted records twice. Then: every record
    produced was consumed, what is left of the topic is a fraction of what was produced, and the
    log start of every partition is where the last run put it, never above the group's commit."""
    env, ns = kube_node_env, fleet
    topic, group, partitions = "busy", "busy-readers", 3
    client(env, ns, "create", topic, str(partitions))
    client(env, ns, "commit", topic, group, *(f"{p}:0" for p in range(partitions)))
    stop_file = env.control_plane.directory / f"stop-{uuid.uuid4().hex[:6]}"
    ledger = subprocess.Popen(client_argv(env, ns, "ledger", topic, group, str(stop_file)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    runs: dict[str, dict] = {}  # lastRunTime -> the status after that run
    try:
        apply(env, deletion("busy", ns, topic, {"consumedBy": [group]}, interval="30s"))

        def deleting_runs():
            assert ledger.poll() is None, ledger.communicate()
            obj = get_json(env, "recorddeletion", "busy", "-n", ns)
            st = obj.get("status") or {}
            if st.get("lastRunTime") and condition(obj, "Ready").get("reason") == "Deleted":
                runs[st["lastRunTime"]] = st
            return [t for t, s in sorted(runs.items()) if any(r["recordsDeleted"] for r in s.get("partitions") or ())]
        with explained(env, ns):
            wait_for("two runs of the RecordDeletion that deleted records", deleting_runs,
                     until=lambda deleting: len(deleting) >= 2, timeout=180, interval=1)
    finally:
        stop_file.touch()
        out, err = ledger.communicate(timeout=240)
    assert ledger.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["errors"] == [] and result["consumer_errors"] == [], result
    missing = set(result["delivered"]) - set(result["consumed"])
    assert not missing, f"{len(missing)} of {len(result['delivered'])} produced records never consumed: {sorted(missing)[:10]}"
    assert result["commits"] > 0 and len(result["delivered"]) > 0

    def settled():
        """The offsets and the status of the run that set them (no run in between)."""
        before = get_json(env, "recorddeletion", "busy", "-n", ns)
        state = client(env, ns, "offsets", topic, str(partitions), group)
        after = get_json(env, "recorddeletion", "busy", "-n", ns)
        return (state, after) if before["status"]["lastRunTime"] == after["status"]["lastRunTime"] else None
    state, last = wait_for("offsets read between two runs", settled, timeout=90)
    marks = {int(p): v for p, v in state["watermarks"].items()}
    committed = {int(p): o for p, o in state["committed"].items()}
    for p in range(partitions):
        start, end = marks[p]
        assert start == rows(last)[p]["lowWatermark"], (p, marks, last)
        assert start <= committed[p], f"partition {p}: log start {start} above the group's commit {committed[p]}"
    produced, left = sum(end for _, end in marks.values()), sum(end - start for start, end in marks.values())
    assert produced == len(result["delivered"]), (marks, len(result["delivered"]))
    # Bounded: the purge keeps up; only what was produced since the last run is still there.
    assert left < produced / 2, f"{left} of {produced} records still in the topic after {len(runs)} runs: {marks}"
    env.kubectl("delete", "recorddeletion", "busy", "-n", ns, "--wait=true", "--timeout=60s")


def test_offset_policy_deletes_exactly_what_it_names_and_reapplying_changes_nothing(kube_node_env, fleet):
    env, ns = kube_node_env, fleet
    topic = "byoffset"
    client(env, ns, "create", topic, "2")
    for p in (0, 1):
        produce(env, ns, topic, p, 30)
    obj = deletion("off", ns, topic, {"offset": 10}, partitions=[0])
    apply(env, obj)
    done = status_of(env, ns, "off", "Deleted")
    assert watermarks(env, ns, topic, 2) == {0: (10, 30), 1: (0, 30)}
    assert rows(done) == {0: {"partition": 0, "lowWatermark": 10, "recordsDeleted": 10}}
    assert done["status"]["recordsDeleted"] == 10 and "nextRunTime" not in done["status"]

    # The same resource again: nothing changes, nothing runs. A second resource's run afterwards
    # shows the operator was at work meanwhile.
    assert "unchanged" in apply(env, obj)
    produce(env, ns, topic, 0, 5)
    apply(env, deletion("witness", ns, topic, {"offset": 3}, partitions=[1]))
    status_of(env, ns, "witness", "Deleted")
    again = get_json(env, "recorddeletion", "off", "-n", ns)
    assert again["metadata"]["generation"] == done["metadata"]["generation"]
    assert again["status"]["lastRunTime"] == done["status"]["lastRunTime"]
    assert again["status"]["recordsDeleted"] == 10
    assert watermarks(env, ns, topic, 2) == {0: (10, 35), 1: (3, 30)}
    for name in ("off", "witness"):
        env.kubectl("delete", "recorddeletion", name, "-n", ns, "--wait=true", "--timeout=60s")


def test_timestamp_policy_deletes_the_records_older_than_the_time(kube_node_env, fleet):
    env, ns = kube_node_env, fleet
    topic = "bytime"
    client(env, ns, "create", topic, "1")
    produce(env, ns, topic, 0, 12, T0_MS)  # record i has CreateTime T0 + i seconds
    when = datetime.fromtimestamp((T0_MS + 5000) / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    apply(env, deletion("ts", ns, topic, {"timestamp": when}))
    got = status_of(env, ns, "ts", "Deleted")
    assert watermarks(env, ns, topic, 1) == {0: (5, 12)}  # records 0-4 are older than T0+5s
    assert rows(got)[0]["recordsDeleted"] == 5
    env.kubectl("delete", "recorddeletion", "ts", "-n", ns, "--wait=true", "--timeout=60s")


def test_bad_specs_get_a_condition_naming_the_field(kube_node_env, fleet):
    env, ns = kube_node_env, fleet
    topic = "badspecs"
    client(env, ns, "create", topic, "2")
    produce(env, ns, topic, 0, 10)
    cases = [
        ("bad-topic", deletion("bad-topic", ns, "no-such-topic", {"offset": 1}), "TopicNotFound", "spec.topic"),
        ("bad-part", deletion("bad-part", ns, topic, {"offset": 1}, partitions=[0, 7]), "PartitionNotFound",
         "spec.partitions"),
        ("bad-group", deletion("bad-group", ns, topic, {"consumedBy": ["no-such-group"]}), "GroupNotFound",
         "spec.before.consumedBy"),
    ]
    for _, obj, _, _ in cases:
        apply(env, obj)
    for name, _, reason, field in cases:
        ready = condition(status_of(env, ns, name, reason), "Ready")
        assert field in ready["message"] and ready["status"] == "False", ready
    assert watermarks(env, ns, topic, 2) == {0: (0, 10), 1: (0, 0)}
    for name, *_ in cases:
        env.kubectl("delete", "recorddeletion", name, "-n", ns, "--wait=true", "--timeout=60s")


# --- the quickstart (docs/quickstart.md) after its cluster: examples, kcat, metrics, deletion ----


def test_the_topic_and_quota_examples_reach_ready_and_kcat_goes_through_the_bootstrap_service(
        kube_node_env, fleet):
    """examples/kafkatopic.yaml and examples/clientquota.yaml as written reach Ready (the quota
    reached through the cluster's own bootstrap Service by the in-cluster operator, held by every
    broker); kcat on the host, with the cluster's DNS, produces to the example topic through
    demo-bootstrap and consumes the records back."""
    from tests.support.clients import kcat_path

    env, ns = kube_node_env, fleet
    env.kubectl("apply", "-n", ns, "-f", str(EXAMPLES / "kafkatopic.yaml"), "-f", str(EXAMPLES / "clientquota.yaml"))
    for kind, name in (("kafkatopic", "greetings"), ("clientquota", "batch-loader")):
        def ready(kind=kind, name=name):
            obj = get_json(env, kind, name, "-n", ns, check=False)
            return obj if condition(obj, "Ready").get("status") == "True" else condition(obj, "Ready") or None
        with explained(env, ns):
            wait_for(f"{kind} {name} Ready", ready, until=lambda r: isinstance(r, dict) and "spec" in r, timeout=120)
    quota = get_json(env, "clientquota", "batch-loader", "-n", ns)
    assert [b["nodeId"] for b in quota["status"]["brokers"]] == [0, 1, 2], quota["status"]
    assert all(b.get("producerByteRate") == 1048576 for b in quota["status"]["brokers"]), quota["status"]
    bootstrap = f"{NAME}-bootstrap.{ns}.svc:9092"
    kcat = kcat_path()
    sent = subprocess.run(cluster_dns.argv(env, ns, [kcat, "-b", bootstrap, "-t", "greetings", "-P", "-K:",
                                                     "-X", "request.required.acks=all"]),
                          input="k1:hello\nk2:world\n", capture_output=True, text=True, timeout=120)
    assert sent.returncode == 0, sent.stderr[-3000:]
    got = subprocess.run(cluster_dns.argv(env, ns, [kcat, "-b", bootstrap, "-t", "greetings", "-C", "-o", "beginning",
                                                    "-e", "-q", "-f", "%k=%s\\n"]),
                         capture_output=True, text=True, timeout=120)
    assert got.returncode == 0, got.stderr[-3000:]
    assert sorted(got.stdout.split()) == ["k1=hello", "k2=world"], got.stdout


def test_every_metric_the_dashboards_and_alerts_use_is_exported_by_the_pods(kube_node_env, fleet):
    """Scraped as a PodMonitor would, from each broker pod's and the operator pod's IP: every
    flotilla_* name the shipped rules and dashboards use is exported (recorded names are the
    rules' own)."""
    env, ns = kube_node_env, fleet
    pages = []
    brokers = get_json(env, "pods", "-n", ns, "-l", "app.kubernetes.io/component=broker")["items"]
    operator = leader_pod(env)  # the standby reports no cluster's gauges
    assert len(brokers) == 3
    for pod, port in [(p, 9404) for p in brokers] + [(operator, 9405)]:
        with urllib.request.urlopen(f"http://{pod['status']['podIP']}:{port}/metrics", timeout=10) as resp:
            pages.append(resp.read().decode())
    exported = set().union(*(monitoring_names.exported(page) for page in pages))
    used = monitoring_names.used()
    missing = {n: sorted(w) for n, w in used.items() if n not in exported and n not in monitoring_names.recorded()}
    assert not missing, f"used by rules/dashboards, exported by no pod: {missing}"


def test_deleting_the_kafkacluster_leaves_only_what_outlives_it(kube_node_env, fleet):
    """The quickstart's last step (this module's last test): `kubectl delete kafkacluster demo`.
    Gone: the brokers' pods, the StatefulSet, Services, ConfigMaps, RBAC, PodDisruptionBudget, the
    fleet's Leases and the KafkaTopics the fleet created (`__consumer_offsets`, the topics the tests
    created through Kafka). Left, by design: the ConfigMap demo-cluster-id (a re-created cluster
    keeps its id), the KafkaTopic the user applied, and PVCs (none: ephemeral storage)."""
    env, ns = kube_node_env, fleet
    fleet_topics = get_json(env, "kafkatopics", "-n", ns, "-l", "flotilla.io/created-by=fleet")["items"]
    assert fleet_topics, "the tests created topics through Kafka: their KafkaTopics are the fleet's"
    env.kubectl("delete", "kafkacluster", NAME, "-n", ns, "--wait=true", "--timeout=120s", timeout=150)
    kinds = "pods,statefulsets,services,configmaps,serviceaccounts,roles,rolebindings,poddisruptionbudgets,leases,kafkatopics,persistentvolumeclaims"

    def left():
        items = get_json(env, kinds, "-n", ns)["items"]
        return sorted(f"{o['kind']}/{o['metadata']['name']}" for o in items
                      if o["metadata"]["name"] not in ("kube-root-ca.crt", "default"))
    with explained(env, ns):
        remaining = wait_for("only what outlives the KafkaCluster", left,
                             until=lambda names: names == ["ConfigMap/demo-cluster-id", "KafkaTopic/greetings"],
                             timeout=120, interval=1)
    assert remaining == ["ConfigMap/demo-cluster-id", "KafkaTopic/greetings"]


# --- the persistent three-broker example (examples/kafkacluster.yaml) ---------------------------


def test_the_persistent_example_keeps_acknowledged_records_across_a_pod_replacement_and_its_claims(
        kube_node_env, installed):
    """examples/kafkacluster.yaml applied as written (three brokers with 500m CPU each on claims,
    deleteClaim false), after the development cluster is gone: it goes Ready with a Bound claim per
    broker; records kcat produced with acks=all through the bootstrap Service to an RF=3 topic are
    all there after a broker pod is deleted and comes back on its claim; deleting the KafkaCluster
    removes the pods and leaves the claims (deleteClaim false), which the test then deletes itself.
    The node's volumes are static local PersistentVolumes (flotilla/testenv/node.py)."""
    from tests.support.clients import kcat_path

    env = kube_node_env
    ns = f"persistent-{uuid.uuid4().hex[:8]}"
    env.kubectl("create", "namespace", ns)
    try:
        env.kubectl("apply", "-n", ns, "-f", str(EXAMPLES / "kafkacluster.yaml"))
        with explained(env, ns):
            wait_for("the persistent example Ready", cluster_ready(env, ns), timeout=READY_TIMEOUT)

        def claims():
            return {c["metadata"]["name"]: c["status"].get("phase")
                    for c in get_json(env, "persistentvolumeclaims", "-n", ns)["items"]}
        bound = claims()
        assert len(bound) == 3 and set(bound.values()) == {"Bound"}, bound
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
            "metadata": {"name": "orders", "labels": {"flotilla.io/cluster": NAME}},
            "spec": {"partitions": 3, "replicas": 3, "config": {"min.insync.replicas": "2"}}}))
        wait_for("KafkaTopic orders Ready",
                 lambda: condition(get_json(env, "kafkatopic", "orders", "-n", ns, check=False), "Ready")
                 .get("status") == "True", timeout=120)
        bootstrap = f"{NAME}-bootstrap.{ns}.svc:9092"
        kcat = kcat_path()
        lines = "".join(f"k{i}:v{i}\n" for i in range(300))
        sent = subprocess.run(cluster_dns.argv(env, ns, [kcat, "-b", bootstrap, "-t", "orders", "-P", "-K:",
                                                         "-X", "request.required.acks=all"]),
                              input=lines, capture_output=True, text=True, timeout=120)
        assert sent.returncode == 0, sent.stderr[-3000:]

        old_uid = get_json(env, "pod", f"{NAME}-broker-1", "-n", ns)["metadata"]["uid"]
        env.kubectl("delete", "pod", f"{NAME}-broker-1", "-n", ns, "--wait=true", "--timeout=150s", timeout=180)
        with explained(env, ns):
            wait_for("the replaced broker pod Ready and the cluster Ready again",
                     lambda: (get_json(env, "pod", f"{NAME}-broker-1", "-n", ns, check=False) or {}).get("metadata", {})
                     .get("uid") not in (None, old_uid) and cluster_ready(env, ns)(), timeout=READY_TIMEOUT)
        assert claims() == bound, "the replaced pod is back on its own claim"
        got = subprocess.run(cluster_dns.argv(env, ns, [kcat, "-b", bootstrap, "-t", "orders", "-C", "-o", "beginning",
                                                        "-e", "-q", "-f", "%k=%s\\n"]),
                             capture_output=True, text=True, timeout=120)
        assert got.returncode == 0, got.stderr[-3000:]
        assert sorted(got.stdout.split()) == sorted(f"k{i}=v{i}" for i in range(300))

        env.kubectl("delete", "kafkacluster", NAME, "-n", ns, "--wait=true", "--timeout=120s", timeout=150)
        with explained(env, ns):
            wait_for("the brokers' pods gone", lambda: not get_json(env, "pods", "-n", ns)["items"], timeout=180)
        assert claims() == bound, "deleteClaim: false keeps every broker's claim"
    finally:
        for kind in ("kafkatopic", "kafkacluster", "persistentvolumeclaims"):
            env.kubectl("delete", kind, "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False, timeout=150)
        env.kubectl("delete", "namespace", ns, "--wait=false", check=False)


# --- an elastic fleet on real pods (issue 24) ---------------------------------------------------


def test_three_to_five_to_three_brokers_under_a_producer_and_a_group_on_claims(kube_node_env, installed):
    """A KafkaCluster of three brokers on claims (deleteClaim: true, small requests) grows to five
    and shrinks back to three while one client produces (acks=all, idempotent) to a 30-partition
    RF=3 topic and consumes it in a group, committing: after the scale-up every broker holds 18
    replicas and leads 6 partitions; after the scale-down (brokers 3 and 4 drained, then the
    StatefulSet shrunk) each of the three leads 10; no produce failed, every acknowledged record
    was read exactly once, and the removed brokers' claims are deleted ("released": deleteClaim
    true means whenScaled: Delete) while brokers 0..2 keep theirs."""
    env = kube_node_env
    ns = f"elastic-{uuid.uuid4().hex[:8]}"
    topic, group, partitions = "elastic", "elastic-readers", 30
    env.kubectl("create", "namespace", ns)

    def rebalance():
        kc = get_json(env, "kafkacluster", NAME, "-n", ns)
        return {**((kc.get("status") or {}).get("rebalance") or {}), "condition": condition(kc, "Rebalancing")}

    def placement():
        got = client(env, ns, "placement", topic)
        held, led = {b: 0 for b in range(5)}, {b: 0 for b in range(5)}
        for leader, replicas in got.values():
            led[leader] = led.get(leader, 0) + 1  # -1 while a partition has no leader
            for r in replicas:
                held[r] = held.get(r, 0) + 1
        return held, led

    def claims():
        return {c["metadata"]["name"]: c for c in get_json(env, "persistentvolumeclaims", "-n", ns)["items"]}

    stop_file = env.control_plane.directory / f"stop-{ns}"
    ledger = None
    try:
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": NAME},
            "spec": {"replicas": 3, "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                     "storage": {"type": "persistent-claim", "size": "1Gi", "deleteClaim": True}}}))
        with explained(env, ns):
            wait_for("3 brokers Ready on claims", cluster_ready(env, ns), timeout=READY_TIMEOUT)
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaTopic",
            "metadata": {"name": topic, "labels": {"flotilla.io/cluster": NAME}},
            "spec": {"partitions": partitions, "replicas": 3, "config": {"min.insync.replicas": "2"}}}))
        wait_for(f"KafkaTopic {topic} Ready",
                 lambda: condition(get_json(env, "kafkatopic", topic, "-n", ns, check=False), "Ready")
                 .get("status") == "True", timeout=120)
        # The group starts committed at 0 (the ledger consumes with auto.offset.reset=error).
        client(env, ns, "commit", topic, group, *(f"{p}:0" for p in range(partitions)))
        ledger = subprocess.Popen(client_argv(env, ns, "ledger", topic, group, str(stop_file)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

        with explained(env, ns):
            # The operator adopts the first fleet it sees as it is; a later change is what it balances.
            wait_for("the first fleet adopted", rebalance, timeout=120,
                     until=lambda r: r.get("completedBrokers") == [0, 1, 2])
            env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 5}}')
            wait_for("the scale-up rebalance running", rebalance, interval=0.3, timeout=READY_TIMEOUT,
                     until=lambda r: r["condition"].get("status") == "True" and r.get("reason") == "ScaleUp")
            done = wait_for("the scale-up rebalance completed", rebalance, timeout=READY_TIMEOUT,
                            until=lambda r: r.get("phase") == "Idle" and r["condition"].get("status") == "False"
                            and r.get("completedBrokers") == [0, 1, 2, 3, 4])
            assert done["partitionsMoved"] == done["partitionsTotal"] > 0, done
            held, led = wait_for("18 replicas and 6 leaders on each of 5 brokers", placement, timeout=60,
                                 until=lambda hl: set(hl[0].values()) == {18} and set(hl[1].values()) == {6})

            env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 3}}')
            wait_for("the drain done and the StatefulSet shrunk to 3", cluster_ready(env, ns), timeout=READY_TIMEOUT)
            wait_for("the pods of brokers 3 and 4 gone", lambda: {p["metadata"]["name"] for p in
                                                                   get_json(env, "pods", "-n", ns)["items"]},
                     until=lambda names: names == {f"{NAME}-broker-{b}" for b in range(3)}, timeout=120)
            final = wait_for("the scale-down rebalance completed", rebalance, timeout=60,
                             until=lambda r: r.get("phase") == "Idle" and r.get("completedBrokers") == [0, 1, 2])
            assert final["reason"] == "ScaleDown" and final["condition"]["status"] == "False", final
            held, led = wait_for("30 replicas and 10 leaders on each of 3 brokers", placement, timeout=60,
                                 until=lambda hl: hl[0] == {0: 30, 1: 30, 2: 30, 3: 0, 4: 0}
                                 and hl[1] == {0: 10, 1: 10, 2: 10, 3: 0, 4: 0})
            left = wait_for("the claims of brokers 3 and 4 deleted", claims, timeout=120,
                            until=lambda c: set(c) == {f"data-{NAME}-broker-{b}" for b in range(3)})
            assert {c["status"].get("phase") for c in left.values()} == {"Bound"}, left

        result, err = finished_ledger(ledger, stop_file)
        delivered, consumed = result["delivered"], result["consumed"]
        missing: dict[int, int] = {}
        for v in set(delivered) - set(consumed):
            missing[result["partition_of"][v]] = missing.get(result["partition_of"][v], 0) + 1
        if sorted(consumed) != sorted(delivered):
            print("--- the ledger's log ---\n" + err[-8000:])
        assert sorted(consumed) == sorted(delivered), (len(consumed), len(delivered), "unread per partition:",
                                                       missing, "positions:", result["positions"], err[-6000:])
    finally:
        if ledger and ledger.poll() is None:
            ledger.kill()
        for kind in ("kafkatopic", "kafkacluster", "persistentvolumeclaims"):
            env.kubectl("delete", kind, "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False, timeout=150)
        env.kubectl("delete", "namespace", ns, "--wait=false", check=False)


TLS_LISTENERS = [{"name": "SECURE", "port": 9093, "protocol": "SASL_SSL"},
                 {"name": "MTLS", "port": 9094, "protocol": "SSL", "authentication": "tls"}]
TLS_USER_ACLS = [
    {"resource": {"type": "topic", "name": "orders", "patternType": "prefix"},
     "operations": ["Create", "Write", "Read", "Describe"]},
    {"resource": {"type": "group", "name": "orders", "patternType": "prefix"}, "operations": ["Read"]},
]
SCRAM_POD_CLIENT = r'''
import json, sys, time
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
bootstrap, topic, group = sys.argv[1:4]
conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": open("/user/username").read(), "sasl.password": open("/user/password").read(),
        "ssl.ca.location": "/cluster-ca/ca.crt"}
admin = AdminClient(conf)  # held: a handle collected at once would cancel the request
admin.create_topics([NewTopic(topic, 1, -1)])[topic].result(60)
errors = []
p = Producer({**conf, "acks": "all"})
for i in range(10):
    p.produce(topic, f"m{i}".encode(), on_delivery=lambda err, msg: err and errors.append(str(err)))
unflushed = p.flush(60)
c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
c.subscribe([topic])
got, deadline = [], time.time() + 60
while len(got) < 10 and time.time() < deadline:
    m = c.poll(1)
    if m is not None and not m.error():
        got.append(m.value().decode())
c.commit(asynchronous=False)
c.close()
print(json.dumps({"errors": errors, "unflushed": unflushed, "consumed": got}))
'''
SERVED_CERTIFICATE = r'''
import json, ssl, sys
print(json.dumps({h: ssl.get_server_certificate((h, int(sys.argv[1]))) for h in sys.argv[2:]}))
'''


def test_tls_listeners_and_tls_and_scram_users_survive_a_certificate_renewal_with_no_failed_acks_all_produce(
        kube_node_env, installed, tmp_path):
    """A KafkaCluster whose first listener is SASL_SSL (the brokers' and the operator's, SCRAM) and
    whose second requires client certificates, both served with the certificates the operator
    issues, with the authorizer on; a KafkaUser with `authentication: tls` and ACLs on a prefix.
    A client on the host, with the cluster's DNS, trusting only the Secret's ca.crt and presenting
    the user's certificate, checks every broker's name (librdkafka verifies hostnames by default),
    creates a topic, commits, and is refused a topic outside its ACLs. A SCRAM KafkaUser's client
    pod, with the user's Secret and the cluster CA mounted, produces and consumes over SASL_SSL;
    removing its topic ACL in the spec refuses its writes (within a minute; the operator applies
    it at once, the brokers within a second). Then, while the TLS user produces
    (acks=all, idempotent) and consumes continuously, the broker certificates are renewed ahead
    of time (a renewal window in the spec longer than what is left): the brokers roll one at a
    time, no produce fails, every acknowledged record is read exactly once, and each broker
    serves its new certificate."""
    env = kube_node_env
    ns = f"tls-{uuid.uuid4().hex[:8]}"
    topic, group = "orders-tls", "orders-readers"
    env.kubectl("create", "namespace", ns)
    stop_file = env.control_plane.directory / f"stop-{ns}"
    ledger = None
    try:
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": NAME},
            "spec": {"replicas": 3, "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                     "storage": {"type": "ephemeral", "size": "1Gi"}, "listeners": TLS_LISTENERS,
                     "config": {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                "allow.everyone.if.no.acl.found": "false"}}}))
        with explained(env, ns):
            wait_for("3 brokers Ready on TLS listeners", cluster_ready(env, ns), timeout=READY_TIMEOUT)
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": "alice"},
            "spec": {"clusterRef": {"name": NAME}, "authentication": {"type": "tls"},
                     "authorization": {"acls": TLS_USER_ACLS}}}))

        def user_ready():
            obj = get_json(env, "kafkauser", "alice", "-n", ns, check=False)
            ready = condition(obj, "Ready")
            return obj if ready.get("reason") == "Applied" else ready or None
        with explained(env, ns):
            wait_for("KafkaUser alice Applied", user_ready, until=lambda r: isinstance(r, dict) and "spec" in r,
                     timeout=120)
        files = {k: base64.b64decode(v).decode()
                 for k, v in get_json(env, "secret", "alice", "-n", ns)["data"].items()}
        for name in ("ca.crt", "user.crt", "user.key"):
            (tmp_path / name).write_text(files[name])
        conf = {"security.protocol": "SSL", "ssl.ca.location": str(tmp_path / "ca.crt"),
                "ssl.certificate.location": str(tmp_path / "user.crt"),
                "ssl.key.location": str(tmp_path / "user.key")}
        client(env, ns, "create", topic, "3", conf=conf, port=9094)
        client(env, ns, "commit", topic, group, "0:0", "1:0", "2:0", conf=conf, port=9094)
        refused = subprocess.run(client_argv(env, ns, "create", "elsewhere", "1", port=9094), capture_output=True,
                                 text=True, timeout=180, env=client_env(conf))
        assert refused.returncode != 0 and "TOPIC_AUTHORIZATION_FAILED" in refused.stderr, refused.stderr[-2000:]

        # A SCRAM user in a client pod (the user's Secret and the cluster CA mounted, the Flotilla
        # image's Python and confluent-kafka): creates, produces acks=all, consumes in its group.
        bob_acls = [{"resource": {"type": "topic", "name": "bob", "patternType": "prefix"},
                     "operations": ["Create", "Write", "Read", "Describe"]},
                    {"resource": {"type": "group", "name": "bob-readers"}, "operations": ["Read"]}]
        bob = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser", "metadata": {"name": "bob"},
               "spec": {"clusterRef": {"name": NAME}, "authentication": {"type": "scram-sha-512"},
                        "authorization": {"acls": bob_acls}}}
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(bob))

        def bob_ready():
            obj = get_json(env, "kafkauser", "bob", "-n", ns, check=False)
            ready = condition(obj, "Ready")
            return obj if ready.get("reason") == "Applied" and ready.get("observedGeneration") == obj["metadata"][
                "generation"] else ready or None
        with explained(env, ns):
            wait_for("KafkaUser bob Applied", bob_ready, until=lambda r: isinstance(r, dict) and "spec" in r, timeout=120)
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bob-client"},
               "spec": {"restartPolicy": "Never", "containers": [{
                   "name": "client", "image": env.image, "imagePullPolicy": "Never",
                   "command": ["python", "-c", SCRAM_POD_CLIENT, f"{NAME}-bootstrap:9093", "bob-events", "bob-readers"],
                   "volumeMounts": [{"name": "user", "mountPath": "/user", "readOnly": True},
                                    {"name": "ca", "mountPath": "/cluster-ca", "readOnly": True}]}],
                        "volumes": [{"name": "user", "secret": {"secretName": "bob"}},
                                    {"name": "ca", "secret": {"secretName": f"{NAME}-cluster-ca-cert"}}]}}
        env.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(pod))
        phase = wait_for("the client pod to finish", lambda: (get_json(env, "pod", "bob-client", "-n", ns, check=False)
                                                                or {}).get("status", {}).get("phase"),
                         until=lambda p: p in ("Succeeded", "Failed"), timeout=240)
        logs = env.kubectl("logs", "bob-client", "-n", ns, check=False).stdout
        assert phase == "Succeeded", logs[-3000:]
        assert json.loads(logs.strip().splitlines()[-1]) == {
            "errors": [], "unflushed": 0, "consumed": [f"m{i}" for i in range(10)]}, logs[-3000:]

        # Git is the truth: the topic rule removed from bob, his writes are refused (from the host,
        # with bob's password and the cluster CA).
        ca_file = tmp_path / "cluster-ca.crt"
        ca_file.write_text(base64.b64decode(get_json(env, "secret", f"{NAME}-cluster-ca-cert", "-n", ns)["data"]["ca.crt"])
                           .decode())
        password = base64.b64decode(get_json(env, "secret", "bob", "-n", ns)["data"]["password"]).decode()
        bob_conf = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "bob",
                    "sasl.password": password, "ssl.ca.location": str(ca_file)}

        def bob_writes() -> str:
            """What an idempotent produce as bob prints (its result, or the client's error)."""
            proc = subprocess.run(client_argv(env, ns, "produce", "bob-events", "0", "1", port=9093),
                                  capture_output=True, text=True, timeout=120, env=client_env(bob_conf))
            return proc.stdout + proc.stderr[-2000:]
        assert client(env, ns, "offsets", "bob-events", "1", "bob-readers", conf=bob_conf, port=9093)[
            "committed"] == {"0": 10}
        assert '{"errors": [], "unflushed": 0}' in bob_writes()
        bob["spec"]["authorization"]["acls"] = bob_acls[1:]  # the topic rule removed in Git
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump(bob))
        with explained(env, ns):
            # May write no topic now: Kafka refuses the idempotent producer's InitProducerId (KIP-679).
            wait_for("bob's writes refused once his topic ACL is gone", bob_writes,
                     until=lambda out: "CLUSTER_AUTHORIZATION_FAILED" in out or "TOPIC_AUTHORIZATION_FAILED" in out,
                     timeout=60)

        brokers = {k: v for k, v in get_json(env, "secret", f"{NAME}-broker-certs", "-n", ns)["data"].items()}
        ledger = subprocess.Popen(client_argv(env, ns, "ledger", topic, group, str(stop_file), port=9094),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=client_env(conf))
        time.sleep(5)  # records before the roll, so the roll happens under load
        env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p",
                    '{"spec": {"certificates": {"validityDays": 400, "renewBeforeDays": 366}}}')
        with explained(env, ns):
            wait_for("every broker restarted with the renewed certificates", lambda: get_json(env, "pods", "-n", ns)["items"],
                     until=lambda pods: len([p for p in pods if p["metadata"]["name"].startswith(f"{NAME}-broker-")
                                             and (p["metadata"].get("annotations") or {}).get(
                                                 "flotilla.io/certificate-generation") == "2"]) == 3,
                     timeout=READY_TIMEOUT * 2)
            wait_for("Ready after the renewal roll", cluster_ready(env, ns), timeout=READY_TIMEOUT)
        time.sleep(5)  # records after the roll too
        result, err = finished_ledger(ledger, stop_file)
        assert sorted(result["consumed"]) == sorted(result["delivered"]), (
            len(result["consumed"]), len(result["delivered"]), err[-4000:])

        renewed = {k: base64.b64decode(v).decode()
                   for k, v in get_json(env, "secret", f"{NAME}-broker-certs", "-n", ns)["data"].items()}
        assert all(renewed[f"broker-{b}.pem"] != base64.b64decode(brokers[f"broker-{b}.pem"]).decode() for b in range(3))
        hosts = [f"{NAME}-broker-{b}.{NAME}-brokers.{ns}.svc" for b in range(3)]
        served = subprocess.run(cluster_dns.argv(env, ns, [sys.executable, "-c", SERVED_CERTIFICATE, "9093", *hosts]),
                                capture_output=True, text=True, timeout=60)
        assert served.returncode == 0, served.stderr[-2000:]
        got = json.loads(served.stdout)
        for b, host in enumerate(hosts):
            assert got[host].strip() in renewed[f"broker-{b}.pem"], f"broker {b} does not serve its renewed certificate"
    finally:
        if ledger and ledger.poll() is None:
            ledger.kill()
        for kind in ("pod", "kafkauser", "kafkacluster"):
            env.kubectl("delete", kind, "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False, timeout=150)
        env.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def outside_client(address: str, conf: dict[str, str] | None = None) -> Callable[..., Any]:
    """CLIENT run on the host (outside the cluster, without its DNS), bootstrapping from `address`
    with the client settings `conf`; returns its last line of JSON."""
    env = {**os.environ, "CLIENT_CONF": json.dumps(conf or {})}

    def outside(action: str, topic: str, *args: str, timeout: float = 180):
        proc = subprocess.run([sys.executable, "-c", CLIENT, action, address, topic, *args], capture_output=True,
                              text=True, timeout=timeout, env=env)
        assert proc.returncode == 0, f"{action} {topic} {args}: {proc.stdout}\n{proc.stderr[-3000:]}"
        return json.loads(proc.stdout.strip().splitlines()[-1])
    return outside


def test_an_external_node_port_listener_reaches_every_broker_from_outside_the_cluster(kube_node_env, installed):
    """A listener with `external: {type: nodeport, nodePort: 31090}`: a client outside the cluster
    (on the host, without the cluster's DNS) bootstraps from the node's address at that port;
    Metadata names each broker at its node's address (the pod's status.hostIP) and its own
    nodePort (31091 + ordinal); a three-partition RF=3 topic led by every broker is written with
    acks=all and read back through them. Growing to four brokers gives the new one its Service and
    port without restarting the others."""
    from flotilla.testenv import node

    env = kube_node_env
    ns = f"external-{uuid.uuid4().hex[:8]}"
    outside = outside_client(f"{node.GATEWAY}:31090")
    env.kubectl("create", "namespace", ns)
    try:
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
            "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": NAME},
            "spec": {"replicas": 3, "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                     "storage": {"type": "ephemeral", "size": "1Gi"},
                     "listeners": [{"name": "PLAINTEXT", "port": 9092},
                                   {"name": "EXTERNAL", "port": 9095,
                                    "external": {"type": "nodeport", "nodePort": 31090}}]}}))
        with explained(env, ns):
            wait_for("3 brokers Ready", cluster_ready(env, ns), timeout=READY_TIMEOUT)
        assert outside("brokers", "-") == {str(b): f"{node.GATEWAY}:{31091 + b}" for b in range(3)}
        outside("create", "outside", "3")
        placement = outside("placement", "outside")
        assert sorted(leader for leader, _ in placement.values()) == [0, 1, 2], placement
        result = outside("produce", "outside", "0", "50")
        assert result == {"errors": [], "unflushed": 0}, result
        for p in (1, 2):
            assert outside("produce", "outside", str(p), "50") == {"errors": [], "unflushed": 0}
        marks = outside("offsets", "outside", "3")["watermarks"]
        assert marks == {"0": [0, 50], "1": [0, 50], "2": [0, 50]}, marks

        pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in get_json(env, "pods", "-n", ns)["items"]}
        env.kubectl("patch", "kafkacluster", NAME, "-n", ns, "--type=merge", "-p", '{"spec": {"replicas": 4}}')
        with explained(env, ns):
            wait_for("4 brokers Ready", cluster_ready(env, ns, replicas=4), timeout=READY_TIMEOUT)
            wait_for("the fourth broker in Metadata at its port", lambda: outside("brokers", "-"),
                     until=lambda got: got.get("3") == f"{node.GATEWAY}:31094", timeout=120)
        after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in get_json(env, "pods", "-n", ns)["items"]}
        assert {n: after[n] for n in pods} == pods, "growing restarted a broker"
        assert get_json(env, "service", f"{NAME}-broker-3-9095", "-n", ns)["spec"]["ports"][0]["nodePort"] == 31094
    finally:
        env.kubectl("delete", "kafkacluster", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False,
                    timeout=150)
        env.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_a_load_balancer_listener_reaches_every_broker_through_its_own_load_balancer(kube_node_env, installed, tmp_path):
    """An SSL listener with `external: {type: loadbalancer}`, with a stand-in cloud giving each
    LoadBalancer Service an address (testenv/load_balancers.py; kube-proxy routes it to the pods as
    in a cloud): the brokers wait for their load balancers' addresses (handed over by the operator
    through the ConfigMap they mount) and for certificates that name them, then advertise them; a
    client on the host that verifies host names, trusting the cluster CA, bootstraps from the
    bootstrap load balancer, Metadata names each broker at its own load balancer and the listener's
    port, and a three-partition RF=3 topic led by every broker is written with acks=all through them."""
    from flotilla.testenv.load_balancers import LoadBalancerController

    env = kube_node_env
    ns = f"cloud-{uuid.uuid4().hex[:8]}"
    env.kubectl("create", "namespace", ns)

    def addresses() -> dict[str, str]:
        got = get_json(env, "services", "-n", ns, "-l", "flotilla.io/external-listener")["items"]
        return {s["metadata"]["name"]: ingress["ip"] for s in got
                for ingress in ((s.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []}
    try:
        with LoadBalancerController(env.kubectl) as cloud:
            env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump({
                "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": NAME},
                "spec": {"replicas": 3, "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                         "storage": {"type": "ephemeral", "size": "1Gi"},
                         "listeners": [{"name": "PLAINTEXT", "port": 9092},
                                       {"name": "CLOUD", "port": 9096, "protocol": "SSL",
                                        "external": {"type": "loadbalancer"}}]}}))
            with explained(env, ns):
                wait_for("3 brokers Ready", cluster_ready(env, ns), timeout=READY_TIMEOUT)
            assert not cloud.errors, cloud.errors
            lbs = addresses()
            ca = tmp_path / "ca.crt"
            ca.write_bytes(base64.b64decode(get_json(env, "secret", f"{NAME}-cluster-ca-cert", "-n", ns)["data"]["ca.crt"]))
            outside = outside_client(f"{lbs[f'{NAME}-bootstrap-9096']}:9096", {
                "security.protocol": "SSL", "ssl.ca.location": str(ca), "ssl.endpoint.identification.algorithm": "https"})
            assert outside("brokers", "-") == {str(b): f"{lbs[f'{NAME}-broker-{b}-9096']}:9096" for b in range(3)}
            outside("create", "clouded", "3")
            placement = outside("placement", "clouded")
            assert sorted(leader for leader, _ in placement.values()) == [0, 1, 2], placement
            for p in range(3):
                assert outside("produce", "clouded", str(p), "50") == {"errors": [], "unflushed": 0}
            marks = outside("offsets", "clouded", "3")["watermarks"]
            assert marks == {"0": [0, 50], "1": [0, 50], "2": [0, 50]}, marks
    finally:
        env.kubectl("delete", "kafkacluster", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False,
                    timeout=150)
        env.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def test_on_an_ssl_first_listener_the_brokers_and_the_operator_authenticate_with_certificates(
        kube_node_env, installed, tmp_path):
    """A KafkaCluster whose only listener is SSL (no SASL), with the authorizer on and nothing
    allowed without an ACL: the brokers present their certificates to each other there and are
    User:flotilla-broker (a super user), so followers replicate and every broker turns Ready (its
    partitions' ISRs full); the operator presents its own and is User:flotilla-operator, so a
    ClientQuota is applied on every broker; a client without a certificate (User:ANONYMOUS) is
    refused a topic. Before, brokers and operator were ANONYMOUS here, which had to be a super user."""
    env = kube_node_env
    ns = f"ssl-{uuid.uuid4().hex[:8]}"
    env.kubectl("create", "namespace", ns)
    try:
        env.kubectl("apply", "-n", ns, "-f", "-", input=yaml.safe_dump_all([
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster", "metadata": {"name": NAME},
             "spec": {"replicas": 3, "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
                      "storage": {"type": "ephemeral", "size": "1Gi"},
                      "listeners": [{"name": "TLS", "port": 9093, "protocol": "SSL"}],
                      "config": {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                                 "allow.everyone.if.no.acl.found": "false"}}},
            {"apiVersion": "flotilla.io/v1alpha1", "kind": "ClientQuota", "metadata": {"name": "loader"},
             "spec": {"clusterRef": {"name": NAME}, "entity": {"clientId": "loader"}, "producerByteRate": 1048576}}]))
        with explained(env, ns):
            wait_for("3 brokers Ready with the authorizer on", cluster_ready(env, ns), timeout=READY_TIMEOUT)
            quota = wait_for("ClientQuota loader Applied", lambda: condition(
                get_json(env, "clientquota", "loader", "-n", ns, check=False), "Ready"),
                until=lambda c: c.get("reason") == "Applied", timeout=120)
        assert quota["status"] == "True", quota
        ca = tmp_path / "ca.crt"
        ca.write_bytes(base64.b64decode(get_json(env, "secret", f"{NAME}-cluster-ca-cert", "-n", ns)["data"]["ca.crt"]))
        anonymous = {"security.protocol": "SSL", "ssl.ca.location": str(ca)}
        refused = subprocess.run(client_argv(env, ns, "create", "anyone", "1", port=9093), capture_output=True,
                                 text=True, timeout=180, env=client_env(anonymous))
        assert refused.returncode != 0 and "AUTHORIZATION_FAILED" in refused.stderr, refused.stderr[-2000:]
    finally:
        env.kubectl("delete", "kafkacluster", "--all", "-n", ns, "--wait=true", "--timeout=120s", check=False,
                    timeout=150)
        env.kubectl("delete", "namespace", ns, "--wait=false", check=False)
