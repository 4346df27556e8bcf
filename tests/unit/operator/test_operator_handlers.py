"""The handlers' logic, against a fake API (no kopf runner, no cluster)."""

from __future__ import annotations

import json
import logging

import copy
from datetime import datetime, timezone

import kopf
import pytest

from flotilla_operator import handlers
from flotilla_operator.reconcilers import kafka_cluster as cluster_reconciler
from flotilla_operator.reconcilers import record_deletion as deletion_reconciler
from flotilla_operator.reconcilers.common import log
from flotilla_operator.clients.kube import ApiError, kubeconfig_user_needs_client
from flotilla_operator.settings import Settings

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


class FakeKube:
    def __init__(self, objects=None, fail_kind=None):
        self.objects = {}
        for obj in objects or []:
            self.objects[(obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])] = obj
        self.applied = []
        self.created = []
        self.deleted = []
        self.statuses = []
        self.fail_kind = fail_kind

    async def get(self, kind, namespace, name):
        return copy.deepcopy(self.objects.get((kind, namespace, name)))

    async def list(self, kind, namespace=None, label_selector=None):
        def selected(obj):
            labels = obj["metadata"].get("labels") or {}
            for term in (label_selector or "").split(","):
                key, eq, value = term.partition("=")
                if term and (key not in labels or (eq and labels[key] != value)):
                    return False
            return True

        return [o for (k, ns, _), o in self.objects.items() if k == kind and namespace in (None, ns) and selected(o)]

    async def apply(self, obj):
        if obj["kind"] == self.fail_kind:
            raise ApiError(422, f"{obj['kind']} is invalid")
        self.applied.append(obj)
        stored = copy.deepcopy(obj)
        if obj["kind"] == "StatefulSet":
            stored["metadata"]["generation"] = 1
            stored["status"] = {"observedGeneration": 1, "replicas": 0, "readyReplicas": 0}
        self.objects[(obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])] = stored
        return stored

    async def create(self, obj):
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        if key in self.objects:
            return None
        self.created.append(obj)
        self.objects[key] = copy.deepcopy(obj)
        return self.objects[key]

    async def replace(self, obj):
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        self.objects[key] = copy.deepcopy(obj)
        return self.objects[key]

    async def delete(self, kind, namespace, name, *, propagation="Background", uid=None):
        self.deleted.append((kind, name, propagation))
        self.objects.pop((kind, namespace, name), None)

    async def patch_status(self, kind, namespace, name, status):
        self.statuses.append((kind, name, status))
        self.objects[(kind, namespace, name)]["status"] = status
        return self.objects[(kind, namespace, name)]


def cluster(spec=None, generation=2):
    return {
        "apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaCluster",
        "metadata": {"name": "demo", "namespace": "ns", "uid": "0b7f7d0e-6a11-4b8e-9a56-6f1c1c8e3b54", "generation": generation},
        "spec": spec if spec is not None else {"replicas": 3},
    }


def memo_for(kube):
    return kopf.Memo(kube=kube, settings=Settings(broker_image="flotilla:unit"), locks={})


async def test_reconcile_applies_everything_and_writes_status():
    kube = FakeKube([cluster()])
    status = await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    assert [o["kind"] for o in kube.applied][-1] == "StatefulSet"
    assert len(kube.applied) == 9
    assert status["observedGeneration"] == 2
    assert status["bootstrapServers"] == "demo-bootstrap.ns.svc:9092"
    assert kube.statuses[-1][2] == status
    ready = status["conditions"][0]
    assert ready["type"] == "Ready" and ready["status"] == "False"


async def test_reconcile_skips_unchanged_status():
    kube = FakeKube([cluster()])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="first")
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="second")
    assert len(kube.statuses) == 1


async def test_invalid_broker_config_applies_nothing():
    kube = FakeKube([cluster({"replicas": 3, "config": {"no.such.key": "1"}})])
    with pytest.raises(kopf.PermanentError):
        await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    assert kube.applied == []
    (kind, name, status) = kube.statuses[-1]
    reasons = {c["type"]: (c["status"], c["reason"]) for c in status["conditions"]}
    assert reasons["Ready"] == ("False", "InvalidConfig") and reasons["Degraded"] == ("True", "InvalidConfig")
    assert "no.such.key" in status["conditions"][0]["message"]


async def test_apply_failure_reports_and_retries():
    kube = FakeKube([cluster()], fail_kind="PodDisruptionBudget")
    with pytest.raises(kopf.TemporaryError):
        await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    status = kube.statuses[-1][2]
    assert status["conditions"][0]["reason"] == "ApplyFailed"
    assert "PodDisruptionBudget" in status["conditions"][0]["message"]


async def test_reconcile_of_missing_cluster_is_a_no_op():
    kube = FakeKube([])
    assert await cluster_reconciler.reconcile(memo_for(kube), "ns", "gone", why="test") is None
    assert kube.applied == [] and kube.statuses == []


async def test_refresh_status_follows_statefulset():
    kube = FakeKube([cluster()])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="test")
    sts = copy.deepcopy(kube.objects[("StatefulSet", "ns", "demo-broker")])
    sts["status"] = {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
                     "currentRevision": "r1", "updateRevision": "r1"}
    await cluster_reconciler.refresh_status(memo, "ns", "demo", sts)
    status = kube.objects[("KafkaCluster", "ns", "demo")]["status"]
    assert status["conditions"][0]["status"] == "True" and status["readyReplicas"] == 3


async def test_record_deletion_invalid_spec_gets_a_condition_naming_the_field():
    """An interval below a second passes the schema's pattern but would spin: the run refuses it in
    a condition naming spec.interval and schedules nothing until the spec changes."""
    deletion = {"kind": "RecordDeletion", "metadata": {"name": "purge", "namespace": "ns", "generation": 2},
                "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": 5}, "interval": "0s"}}
    kube = FakeKube([deletion])
    due = await deletion_reconciler.run_record_deletion(memo_for(kube), "ns", "purge", NOW)
    status = kube.statuses[-1][2]
    ready = status["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "InvalidSpec")
    assert "spec.interval" in ready["message"] and status["observedGeneration"] == 2
    assert due is None and status["nextRunTime"] is None and "lastRunTime" not in status


async def test_record_deletion_waits_for_a_ready_cluster_with_backoff():
    """A cluster that is not Ready is not contacted: ClusterNotReady, retried later and later."""
    deletion = {"kind": "RecordDeletion", "metadata": {"name": "purge", "namespace": "ns", "generation": 1},
                "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": 5}}}
    cluster = {"kind": "KafkaCluster", "metadata": {"name": "demo", "namespace": "ns"},
               "status": {"conditions": [{"type": "Ready", "status": "False", "reason": "Progressing"}]}}
    kube = FakeKube([deletion, cluster])
    memo = memo_for(kube)
    first = await deletion_reconciler.run_record_deletion(memo, "ns", "purge", NOW)
    second = await deletion_reconciler.run_record_deletion(memo, "ns", "purge", NOW)
    ready = kube.statuses[-1][2]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "ClusterNotReady") and "Progressing" in ready["message"]
    assert NOW < first < second


async def test_client_quota_is_applied_through_its_clusters_bootstrap(monkeypatch):
    """The ClientQuota handler applies the quota (it is not the NotImplemented placeholder): it waits
    for the KafkaCluster's status.bootstrapServers, sends AlterClientQuotas there and reports what
    each broker holds. kafka_admin is replaced by a recorder: this checks the handler's logic; the
    wire side runs against a real broker in tests/e2e/test_operator_quotas.py."""
    from flotilla_operator.clients import kafka_admin

    quota = {"kind": "ClientQuota", "metadata": {"name": "q", "namespace": "ns", "generation": 1, "uid": "uid-q",
                                                 "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"clientId": "etl"}, "producerByteRate": 1024}}
    kube = FakeKube([quota, cluster()])
    memo = memo_for(kube)
    sent, held = [], {}

    async def alter(bootstrap, entity, ops, auth):
        assert auth == kafka_admin.PLAINTEXT  # a PLAINTEXT cluster: no credentials
        sent.append((bootstrap, entity, ops))
        held.update({k: v for k, v in ops.items() if v is not None})

    async def brokers(bootstrap, auth):
        return [kafka_admin.BrokerAddress(1, "demo-broker-0", 9092), kafka_admin.BrokerAddress(2, "demo-broker-1", 9092)]

    async def describe(address, entity, auth):
        return dict(held)

    monkeypatch.setattr(kafka_admin, "alter_client_quota", alter)
    monkeypatch.setattr(kafka_admin, "brokers", brokers)
    monkeypatch.setattr(kafka_admin, "describe_client_quota", describe)

    # No bootstrap address in the KafkaCluster's status yet: Pending, nothing sent.
    await handlers.clientquota_changed(body=kube.objects[("ClientQuota", "ns", "q")], memo=memo)
    ready = kube.objects[("ClientQuota", "ns", "q")]["status"]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "Pending") and "no bootstrap address" in ready["message"]
    assert sent == []

    kube.objects[("KafkaCluster", "ns", "demo")]["status"] = {"bootstrapServers": "demo-bootstrap.ns.svc:9092"}
    await handlers.clientquota_changed(body=kube.objects[("ClientQuota", "ns", "q")], memo=memo)
    assert sent == [("demo-bootstrap.ns.svc:9092", {"client-id": "etl"},
                     {"producer_byte_rate": 1024.0, "consumer_byte_rate": None, "request_percentage": None})]
    status = kube.objects[("ClientQuota", "ns", "q")]["status"]
    ready = status["conditions"][0]
    assert (ready["status"], ready["reason"], ready["message"]) == ("True", "Applied", "2 of 2 broker(s) apply it")
    assert status["brokers"] == [{"nodeId": 1, "producerByteRate": 1024}, {"nodeId": 2, "producerByteRate": 1024}]
    # Recorded as the entity's owner (before it was applied), in a record the KafkaCluster owns.
    owned = kube.objects[("ConfigMap", "ns", "demo-operator-owned")]
    assert owned["metadata"]["ownerReferences"][0]["uid"] == cluster()["metadata"]["uid"]
    assert json.loads(owned["data"]["owners.json"]) == {
        "uid-q": {"kind": "ClientQuota", "name": "q", "entity": {"client-id": "etl"}}}

    # The cluster's own override (an operator outside the cluster) wins, for that cluster only.
    kube.objects[("KafkaCluster", "ns", "demo")]["metadata"]["annotations"] = {
        "flotilla.io/operator-bootstrap-servers": "127.0.0.1:19092"}
    await handlers.clientquota_changed(body=kube.objects[("ClientQuota", "ns", "q")], memo=memo)
    assert sent[-1][0] == "127.0.0.1:19092"


async def test_client_quota_needs_no_finalizer_and_is_removed_when_its_deletion_is_seen(monkeypatch):
    """No kopf deletion handler (it would put a finalizer on every ClientQuota, holding a namespace
    deletion while the operator is away); the DELETED event removes the quota instead."""
    import kopf

    from flotilla_operator.clients import kafka_admin

    registry = kopf.get_default_registry()
    resource = kopf.Resource("flotilla.io", "v1alpha1", "clientquotas")
    # kopf adds its finalizer for deletion handlers, timers and daemons: none on ClientQuotas.
    needing = [h for reg in (registry._changing, registry._spawning) for h in reg._handlers
               if h.requires_finalizer and h.selector is not None and h.selector.check(resource)]
    assert needing == []
    quota = {"kind": "ClientQuota", "metadata": {"name": "q", "namespace": "ns", "uid": "uid-q", "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"clientId": "etl"}, "producerByteRate": 1024}}
    cl = cluster()
    cl["status"] = {"bootstrapServers": "demo-bootstrap.ns.svc:9092"}
    kube = FakeKube([cl])  # the ClientQuota is gone already
    memo = memo_for(kube)
    sent = []

    async def alter(bootstrap, entity, ops, auth):
        sent.append((bootstrap, entity, ops))

    monkeypatch.setattr(kafka_admin, "alter_client_quota", alter)
    log = logging.getLogger("test")
    await handlers.clientquota_deleted(event={"type": "MODIFIED"}, body=quota, memo=memo, logger=log)
    assert sent == []
    kube.objects[("ConfigMap", "ns", "demo-operator-owned")] = {
        "kind": "ConfigMap", "metadata": {"name": "demo-operator-owned", "namespace": "ns"},
        "data": {"owners.json": json.dumps({"uid-q": {"kind": "ClientQuota", "name": "q", "entity": {"client-id": "etl"}}})}}
    await handlers.clientquota_deleted(event={"type": "DELETED"}, body=quota, memo=memo, logger=log)
    assert sent == [("demo-bootstrap.ns.svc:9092", {"client-id": "etl"},
                     {"producer_byte_rate": None, "consumer_byte_rate": None, "request_percentage": None})]
    # removed, so dropped from the record: the orphan pass has nothing left to do for it
    assert json.loads(kube.objects[("ConfigMap", "ns", "demo-operator-owned")]["data"]["owners.json"]) == {}
    del resource


async def test_client_quota_on_a_sasl_cluster_authenticates_as_the_operator(monkeypatch):
    """The bootstrap listener is SASL_PLAINTEXT: the operator creates its password Secret once,
    writes its SCRAM credential into the brokers' stored credentials and sends with it; a second
    run keeps both (no new password, no new salt)."""
    import base64

    from flotilla_operator.clients import kafka_admin
    from flotilla_operator.clients.credentials import credential_matches
    from broker.metadata.kube_document import document_of

    quota = {"kind": "ClientQuota", "metadata": {"name": "q", "namespace": "ns", "generation": 1, "uid": "uid-q",
                                                 "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"user": "app"}, "producerByteRate": 1024}}
    cl = cluster({"replicas": 1, "listeners": [{"name": "SASL_PLAINTEXT", "port": 9092, "protocol": "SASL_PLAINTEXT"}]})
    cl["status"] = {"bootstrapServers": "demo-bootstrap.ns.svc:9092"}
    kube = FakeKube([quota, cl])
    auths = []

    async def alter(bootstrap, entity, ops, auth):
        auths.append(auth)

    async def brokers(bootstrap, auth):
        return []

    monkeypatch.setattr(kafka_admin, "alter_client_quota", alter)
    monkeypatch.setattr(kafka_admin, "brokers", brokers)
    await handlers.clientquota_changed(body=kube.objects[("ClientQuota", "ns", "q")], memo=memo_for(kube))
    (auth,) = auths
    assert (auth.security_protocol, auth.username, auth.mechanism) == ("SASL_PLAINTEXT", "flotilla-operator", "SCRAM-SHA-512")
    mine = kube.objects[("Secret", "ns", "demo-operator-credentials")]
    assert base64.b64decode(mine["data"]["password"]).decode() == auth.password
    assert mine["metadata"]["ownerReferences"][0]["uid"] == cl["metadata"]["uid"]
    stored = kube.objects[("Secret", "ns", "demo-scram-credentials")]
    assert stored["metadata"]["labels"]["flotilla.io/cluster"] == "demo"
    document = document_of("Secret", "credentials.json", stored)
    assert credential_matches(document, "flotilla-operator", auth.password)
    assert auth.password not in str(document)

    await handlers.clientquota_changed(body=kube.objects[("ClientQuota", "ns", "q")], memo=memo_for(kube))
    assert auths[1] == auth
    assert document_of("Secret", "credentials.json", kube.objects[("Secret", "ns", "demo-scram-credentials")]) == document


def test_login_picks_the_client_library_only_for_exec_users(tmp_path):
    plain = tmp_path / "plain"
    plain.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {token: t}}]\nclusters: [{name: c, cluster: {server: 'https://x'}}]\n"
    )
    exec_ = tmp_path / "exec"
    exec_.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: a\n"
        "contexts: [{name: a, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {exec: {command: gke-gcloud-auth-plugin, apiVersion: client.authentication.k8s.io/v1beta1}}}]\n"
        "clusters: [{name: c, cluster: {server: 'https://x'}}]\n"
    )
    assert kubeconfig_user_needs_client(str(plain)) is False
    assert kubeconfig_user_needs_client(str(exec_)) is True
    # A KUBECONFIG list: the first current-context wins, users may live in another file.
    assert kubeconfig_user_needs_client(f"{tmp_path / 'missing'}:{exec_}") is True


def lease(name, role, holder, cluster_name="demo", age_s=1.0, duration=15):
    from datetime import datetime, timedelta, timezone

    renewed = (datetime.now(timezone.utc) - timedelta(seconds=age_s)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {"kind": "Lease", "metadata": {"name": name, "namespace": "ns", "labels": {
                "flotilla.io/cluster": cluster_name, "flotilla.io/lease": role}},
            "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration}}


async def test_status_reports_registered_brokers_and_the_controller_from_the_leases():
    kube = FakeKube([cluster(),
                     lease("demo-broker-0", "broker", "inc-a"), lease("demo-broker-1", "broker", "inc-b"),
                     lease("demo-broker-2", "broker", "inc-c", age_s=60),       # expired: not counted
                     lease("other-broker-0", "broker", "inc-d", cluster_name="other"),
                     lease("demo-controller", "controller", "1")])
    status = await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    assert status["registeredBrokers"] == 2 and status["controller"] == 1


async def test_reconcile_reports_the_stored_rebalance_as_a_restarted_operator_finds_it():
    """A Blocked rebalance writes no new status while it stays Blocked, so only the cluster's
    reconcile can report it after an operator restart (FlotillaRebalanceBlocked watches it)."""
    from prometheus_client import REGISTRY

    from flotilla_operator import metrics

    body = cluster()
    body["status"] = {"rebalance": {"phase": "Blocked", "reason": "ScaleDown", "partitionsTotal": 0,
                                    "message": "cannot place every replica on broker(s) 0, 1"}}
    metrics.forget_cluster("ns", "demo")
    await cluster_reconciler.reconcile(memo_for(FakeKube([body])), "ns", "demo", why="operator started")
    phases = {p: REGISTRY.get_sample_value("flotilla_operator_rebalance_phase", {"namespace": "ns", "name": "demo", "phase": p})
              for p in metrics.REBALANCE_PHASES}
    metrics.forget_cluster("ns", "demo")
    assert phases == {"Idle": 0, "Moving": 0, "Paused": 0, "Blocked": 1}


async def test_a_lease_event_with_a_new_holder_refreshes_the_status():
    kube = FakeKube([cluster()])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="first")
    assert kube.statuses[-1][2]["registeredBrokers"] == 0 and kube.statuses[-1][2]["controller"] is None
    ctl = lease("demo-controller", "controller", "2")
    kube.objects[("Lease", "ns", "demo-controller")] = ctl
    await handlers.lease_event({"type": "ADDED"}, kopf.Body(ctl), "ns", memo, log)
    assert kube.statuses[-1][2]["controller"] == 2
    writes = len(kube.statuses)
    await handlers.lease_event({"type": "MODIFIED"}, kopf.Body(ctl), "ns", memo, log)  # a renewal
    assert len(kube.statuses) == writes


# ------------------------------------------------------------------------------------------
# Issue 18, item 9: the cluster id outlives the KafkaCluster; podManagementPolicy migration


async def test_reconcile_records_the_cluster_id_and_a_recreated_cluster_reuses_it():
    kube = FakeKube([cluster()])
    status = await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    record = kube.objects[("ConfigMap", "ns", "demo-cluster-id")]
    assert "ownerReferences" not in record["metadata"] and record["immutable"] is True
    first = record["data"]["cluster.id"]
    assert status["clusterId"] == first
    # Deleted and re-created (a new uid, no status): the record, which garbage collection leaves, wins.
    recreated = cluster()
    recreated["metadata"]["uid"] = "11111111-2222-4333-8444-555555555555"
    kube.objects[("KafkaCluster", "ns", "demo")] = recreated
    status = await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="re-created")
    assert status["clusterId"] == first
    config = kube.objects[("ConfigMap", "ns", "demo-config")]["data"]["server.properties"]
    assert f"cluster.id={first}\n" in config
    assert [c["metadata"]["name"] for c in kube.created] == ["demo-cluster-id"]  # written once


async def test_a_spec_cluster_id_other_than_the_recorded_one_applies_nothing():
    kube = FakeKube([cluster()])
    await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    held = kube.objects[("ConfigMap", "ns", "demo-cluster-id")]["data"]["cluster.id"]
    kube.objects[("KafkaCluster", "ns", "demo")]["spec"] = {"replicas": 3, "clusterId": "MkU3OEVBNTcwNTJENDM2Qg"}
    kube.applied.clear()
    with pytest.raises(kopf.PermanentError):
        await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="pinned")
    assert kube.applied == []
    status = kube.statuses[-1][2]
    assert status["conditions"][0]["reason"] == "InvalidSpec" and held in status["conditions"][0]["message"]
    assert status["clusterId"] == held


async def test_an_ordered_ready_statefulset_is_replaced_keeping_its_pods():
    kube = FakeKube([cluster()])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="test")
    old = kube.objects[("StatefulSet", "ns", "demo-broker")]
    old["spec"]["podManagementPolicy"] = "OrderedReady"  # made by an earlier operator version
    old["metadata"]["uid"] = "sts-uid"
    kube.applied.clear()
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="upgrade")
    assert kube.deleted == [("StatefulSet", "demo-broker", "Orphan")]
    assert "StatefulSet" not in [o["kind"] for o in kube.applied]  # re-created on its DELETED event
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="statefulset deleted")
    assert kube.objects[("StatefulSet", "ns", "demo-broker")]["spec"]["podManagementPolicy"] == "Parallel"


async def test_a_recreated_statefulset_over_running_pods_is_held():
    pods = [{"kind": "Pod", "metadata": {"name": f"demo-broker-{i}", "namespace": "ns", "labels": {
        "app.kubernetes.io/name": "flotilla", "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/component": "broker", "controller-revision-hash": "old"}}} for i in range(3)]
    kube = FakeKube([cluster(), *pods])
    await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="statefulset deleted")
    sts = kube.objects[("StatefulSet", "ns", "demo-broker")]
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3


# ------------------------------------------------------------------------------------------
# Events, the pause annotation and a manual rolling update (issue 22)


class EventKube(FakeKube):
    """FakeKube that records posted Events and merge patches."""

    def __init__(self, objects=None, fail_kind=None):
        super().__init__(objects, fail_kind)
        self.events = []
        self.patches = []

    async def post_event(self, event):
        self.events.append(event)

    async def apply(self, obj):
        """As the API server does: an applied spec keeps the stored status."""
        key = (obj["kind"], obj["metadata"]["namespace"], obj["metadata"]["name"])
        old = copy.deepcopy(self.objects.get(key))
        stored = await super().apply(obj)
        if old is not None and "status" in old:
            stored["status"] = old["status"]
        return stored

    async def patch(self, kind, namespace, name, patch):
        self.patches.append((kind, name, patch))
        obj = self.objects[(kind, namespace, name)]
        annotations = obj["metadata"].setdefault("annotations", {})
        for key, value in patch["metadata"]["annotations"].items():
            if value is None:
                annotations.pop(key, None)
            else:
                annotations[key] = value
        return obj

    def reasons(self):
        return [e["reason"] for e in self.events]


def settle(kube, name="demo", ready=True):
    """The StatefulSet controller caught up: every pod on the update revision (and Ready)."""
    sts = kube.objects[("StatefulSet", "ns", f"{name}-broker")]
    sts["status"] = {"observedGeneration": sts["metadata"]["generation"], "replicas": 3,
                     "readyReplicas": 3 if ready else 2, "updatedReplicas": 3,
                     "currentRevision": "r1", "updateRevision": "r1"}


async def test_paused_cluster_applies_nothing_and_says_so():
    body = cluster()
    body["metadata"]["annotations"] = {"flotilla.io/pause-reconciliation": "true"}
    kube = EventKube([body])
    status = await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    assert kube.applied == []
    paused = [c for c in status["conditions"] if c["type"] == "ReconciliationPaused"]
    assert paused and paused[0]["status"] == "True" and status["observedGeneration"] == 2
    assert kube.reasons() == ["ReconciliationPaused"]
    event = kube.events[0]
    assert event["involvedObject"]["kind"] == "KafkaCluster" and event["involvedObject"]["name"] == "demo"
    assert event["type"] == "Normal" and event["metadata"]["namespace"] == "ns"
    # Paused again: nothing new to say. Resumed: applied, the condition gone, one Event.
    await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="again")
    assert kube.reasons() == ["ReconciliationPaused"] and kube.applied == []
    kube.objects[("KafkaCluster", "ns", "demo")]["metadata"]["annotations"] = {}
    status = await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="resumed")
    assert kube.applied and "ReconciliationPaused" not in [c["type"] for c in status["conditions"]]
    assert kube.reasons()[:2] == ["ReconciliationPaused", "ReconciliationResumed"]


async def test_refresh_status_leaves_a_paused_cluster_alone():
    kube = EventKube([cluster()])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="test")
    kube.objects[("KafkaCluster", "ns", "demo")]["metadata"]["annotations"] = {"flotilla.io/pause-reconciliation": "true"}
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="paused")
    written = len(kube.statuses)
    settle(kube)
    await cluster_reconciler.refresh_status(memo, "ns", "demo")
    assert len(kube.statuses) == written


async def test_invalid_config_is_stalled_with_a_warning():
    kube = EventKube([cluster({"replicas": 3, "config": {"no.such.key": "1"}})])
    with pytest.raises(kopf.PermanentError):
        await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    stalled = next(c for c in kube.statuses[-1][2]["conditions"] if c["type"] == "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidConfig")
    assert [(e["type"], e["reason"]) for e in kube.events] == [("Warning", "InvalidConfig")]


async def test_manual_rolling_update_restarts_every_broker_once_and_removes_the_annotation():
    kube = EventKube([cluster()])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="create")
    settle(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="settled")
    assert "ClusterReady" in kube.reasons()
    template = kube.objects[("StatefulSet", "ns", "demo-broker")]["spec"]["template"]
    assert "flotilla.io/restarted-at" not in template["metadata"]["annotations"]

    kube.objects[("KafkaCluster", "ns", "demo")]["metadata"]["annotations"] = {
        "flotilla.io/manual-rolling-update": "true"}
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="annotated")
    sts = kube.objects[("StatefulSet", "ns", "demo-broker")]
    token = sts["spec"]["template"]["metadata"]["annotations"]["flotilla.io/restarted-at"]
    # A new template: held at the top until the controller has seen it; the annotation acknowledged.
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    assert kube.patches == [("KafkaCluster", "demo", {"metadata": {"annotations": {
        "flotilla.io/manual-rolling-update": None}}})]
    assert "flotilla.io/manual-rolling-update" not in kube.objects[("KafkaCluster", "ns", "demo")]["metadata"]["annotations"]
    assert "RollingRestartRequested" in kube.reasons()
    # Later reconciles keep the token (no second restart) and refresh_status agrees on the template.
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="resync")
    again = kube.objects[("StatefulSet", "ns", "demo-broker")]
    assert again["spec"]["template"]["metadata"]["annotations"]["flotilla.io/restarted-at"] == token
    assert len(kube.patches) == 1


async def test_roll_events_name_each_broker_as_the_gate_opens():
    """The roll gate lowering the partition to broker n emits BrokerRestarting for n; the
    status' Reconciling reason turning RollingUpdate and back emits RollStarted and RollFinished."""
    pods = [{"kind": "Pod", "metadata": {"name": f"demo-broker-{i}", "namespace": "ns", "labels": {
        "app.kubernetes.io/name": "flotilla", "app.kubernetes.io/instance": "demo",
        "app.kubernetes.io/component": "broker", "controller-revision-hash": "r1"}},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}} for i in range(3)]
    kube = EventKube([cluster(), *pods])
    memo = memo_for(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="create")
    settle(kube)
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="settled")
    kube.events.clear()
    # A config change: new template, then the controller reports a new update revision.
    kube.objects[("KafkaCluster", "ns", "demo")]["spec"] = {"replicas": 3, "config": {"log.retention.ms": "5"}}
    kube.objects[("KafkaCluster", "ns", "demo")]["metadata"]["generation"] = 3
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="changed")
    sts = kube.objects[("StatefulSet", "ns", "demo-broker")]
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 3
    sts["status"] = {"observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 0,
                     "currentRevision": "r1", "updateRevision": "r2"}
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="controller saw it")
    assert kube.objects[("StatefulSet", "ns", "demo-broker")]["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    assert kube.reasons().count("BrokerRestarting") == 1 and "RollStarted" in kube.reasons()
    assert "broker 2 (pod demo-broker-2)" in next(e for e in kube.events if e["reason"] == "BrokerRestarting")["message"]
    # Re-running while broker 2 restarts says nothing new.
    kube.objects[("StatefulSet", "ns", "demo-broker")]["status"] = sts["status"]
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="again")
    assert kube.reasons().count("BrokerRestarting") == 1
    # Every pod on r2: the roll finishes.
    for p in pods:
        kube.objects[("Pod", "ns", p["metadata"]["name"])]["metadata"]["labels"]["controller-revision-hash"] = "r2"
    kube.objects[("StatefulSet", "ns", "demo-broker")]["status"] = {
        "observedGeneration": 1, "replicas": 3, "readyReplicas": 3, "updatedReplicas": 3,
        "currentRevision": "r2", "updateRevision": "r2"}
    await cluster_reconciler.reconcile(memo, "ns", "demo", why="done")
    assert kube.reasons()[-2:] == ["RollFinished", "ClusterReady"], kube.reasons()


async def test_paused_record_deletion_runs_nothing():
    deletion = {"kind": "RecordDeletion", "metadata": {"name": "purge", "namespace": "ns", "generation": 1,
                                                       "annotations": {"flotilla.io/pause-reconciliation": "true"}},
                "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": 5}}}
    kube = EventKube([deletion])
    due = await deletion_reconciler.run_record_deletion(memo_for(kube), "ns", "purge", NOW)
    assert due is None
    status = kube.statuses[-1][2]
    assert [c["type"] for c in status["conditions"]] == ["ReconciliationPaused"]
    assert kube.reasons() == ["ReconciliationPaused"]
    kube.objects[("RecordDeletion", "ns", "purge")]["metadata"]["annotations"] = {}
    await deletion_reconciler._resume_record_deletion(memo_for(kube), "ns", "purge")
    assert kube.objects[("RecordDeletion", "ns", "purge")]["status"]["conditions"] == []
    assert kube.reasons() == ["ReconciliationPaused", "ReconciliationResumed"]


async def test_record_deletion_invalid_spec_is_stalled():
    deletion = {"kind": "RecordDeletion", "metadata": {"name": "purge", "namespace": "ns", "generation": 2},
                "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": 5}, "interval": "0s"}}
    kube = EventKube([deletion])
    await deletion_reconciler.run_record_deletion(memo_for(kube), "ns", "purge", NOW)
    stalled = next(c for c in kube.statuses[-1][2]["conditions"] if c["type"] == "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "InvalidSpec")
    assert [(e["type"], e["reason"]) for e in kube.events] == [("Warning", "InvalidSpec")]


async def test_paused_client_quota_sends_nothing(monkeypatch):
    from flotilla_operator.clients import kafka_admin

    async def refuse(*a, **k):
        raise AssertionError("a paused ClientQuota must not reach the cluster")

    monkeypatch.setattr(kafka_admin, "alter_client_quota", refuse)
    quota = {"kind": "ClientQuota", "metadata": {"name": "q", "namespace": "ns", "generation": 1, "uid": "uid-q",
                                                 "annotations": {"flotilla.io/pause-reconciliation": "true"},
                                                 "creationTimestamp": "2026-01-01T00:00:00Z"},
             "spec": {"clusterRef": {"name": "demo"}, "entity": {"clientId": "etl"}, "producerByteRate": 1024}}
    kube = EventKube([quota, cluster()])
    kube.objects[("KafkaCluster", "ns", "demo")]["status"] = {"bootstrapServers": "demo-bootstrap.ns.svc:9092"}
    await handlers.clientquota_changed(body=kube.objects[("ClientQuota", "ns", "q")], memo=memo_for(kube))
    status = kube.objects[("ClientQuota", "ns", "q")]["status"]
    assert [(c["type"], c["status"]) for c in status["conditions"]] == [("ReconciliationPaused", "True")]
    assert kube.reasons() == ["ReconciliationPaused"]


async def test_record_deletion_needs_no_finalizer_and_its_schedule_follows_the_watch():
    """No kopf daemon (it would put a finalizer on every RecordDeletion, holding a namespace
    deletion while the operator is away): a watch event starts the resource's schedule, which runs
    at once; the DELETED event stops it and drops the resource's metrics."""
    import asyncio

    from flotilla_operator import metrics
    from flotilla_operator.schedules import Schedules

    registry = kopf.get_default_registry()
    resource = kopf.Resource("flotilla.io", "v1alpha1", "recorddeletions")
    needing = [h for reg in (registry._changing, registry._spawning) for h in reg._handlers
               if h.requires_finalizer and h.selector is not None and h.selector.check(resource)]
    assert needing == []
    deletion = {"kind": "RecordDeletion", "metadata": {"name": "purge", "namespace": "ns", "generation": 1},
                "spec": {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": 5}}}
    kube = FakeKube([deletion])  # no KafkaCluster: the run reports ClusterNotReady
    memo = memo_for(kube)
    memo["rd_schedules"] = Schedules("RecordDeletion")
    metrics.RECORDS_DELETED.labels("ns", "purge").inc(3)
    await handlers.recorddeletion_event(event={"type": None}, body=copy.deepcopy(deletion), namespace="ns",
                                        name="purge", memo=memo)
    (key,) = memo["rd_schedules"].keys()
    for _ in range(200):
        if kube.statuses:
            break
        await asyncio.sleep(0.01)
    ready = kube.statuses[-1][2]["conditions"][0]
    assert (ready["status"], ready["reason"]) == ("False", "ClusterNotReady")
    schedule = memo["rd_schedules"]._by_key[key]
    await handlers.recorddeletion_event(event={"type": "DELETED"}, body=copy.deepcopy(deletion), namespace="ns",
                                        name="purge", memo=memo)
    await asyncio.wait_for(schedule.task, 5)
    assert memo["rd_schedules"].keys() == []
    assert ("ns", "purge") not in {tuple(s.labels.values()) for m in metrics.RECORDS_DELETED.collect()
                                   for s in m.samples}


async def test_a_childs_name_held_by_a_users_object_applies_nothing_and_adds_no_owner():
    """A ConfigMap the user made under the name of a child (demo-config) is never applied over:
    that would put the KafkaCluster's controller reference on it, and deleting the KafkaCluster
    would delete it. Nothing is applied; Ready=False/Conflict names the object (Stalled)."""
    users = {"kind": "ConfigMap", "metadata": {"name": "demo-config", "namespace": "ns", "labels": {"team": "x"}},
             "data": {"k": "v"}}
    kube = FakeKube([cluster(), copy.deepcopy(users)])
    with pytest.raises(kopf.PermanentError, match="ConfigMap demo-config exists"):
        await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="test")
    assert kube.applied == [] and kube.objects[("ConfigMap", "ns", "demo-config")] == users
    ready, stalled = (next(c for c in kube.statuses[-1][2]["conditions"] if c["type"] == t) for t in ("Ready", "Stalled"))
    assert (ready["status"], ready["reason"]) == ("False", "Conflict") and "demo-config" in ready["message"]
    assert stalled["status"] == "True"
    # Once the user's object is gone, the cluster is applied.
    del kube.objects[("ConfigMap", "ns", "demo-config")]
    await cluster_reconciler.reconcile(memo_for(kube), "ns", "demo", why="resync")
    assert kube.objects[("ConfigMap", "ns", "demo-config")]["metadata"]["ownerReferences"][0]["kind"] == "KafkaCluster"
