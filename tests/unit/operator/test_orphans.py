"""What the operator removes for a KafkaUser or ClientQuota that is gone (builders/orphans.py),
and the pass that does it against a fake API (reconcilers/orphans.py); the e2e test deletes a
KafkaUser while the operator is stopped (tests/e2e/test_operator_kafka_user.py)."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from flotilla_operator import events as ev
from flotilla_operator.builders import orphans as orph
from flotilla_operator.clients import kafka_admin
from flotilla_operator.reconcilers import orphans as pass_
from flotilla_operator.status import kafka_cluster_status
from tests.unit.operator.test_operator_handlers import EventKube, cluster, memo_for

NOW = datetime(2026, 12, 7, 12, 0, tzinfo=timezone.utc)


def user(name, uid, cluster_name="demo", quotas=None, deleting=False):
    meta = {"name": name, "namespace": "ns", "uid": uid, "creationTimestamp": "2026-01-01T00:00:00Z"}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-07T12:00:00Z"
    spec = {"clusterRef": {"name": cluster_name}}
    if quotas is not None:
        spec["quotas"] = quotas
    return {"kind": "KafkaUser", "metadata": meta, "spec": spec}


def quota(name, uid, entity, cluster_name="demo"):
    return {"kind": "ClientQuota", "metadata": {"name": name, "namespace": "ns", "uid": uid,
                                                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"clusterRef": {"name": cluster_name}, "entity": entity, "producerByteRate": 1}}


def recorded(*entries):
    owned = {}
    for e in entries:
        owned = orph.with_entry(owned, e) or owned
    return owned


ALICE = orph.user_entry(user("alice", "u-alice"), quota=True)
BOB = orph.user_entry(user("bob", "u-bob"), quota=False)
ETL = orph.quota_entry(quota("etl-q", "q-etl", {"clientId": "etl"}))


def test_a_gone_user_loses_its_credential_acls_and_the_quota_it_set():
    (r,) = orph.orphans(recorded(ALICE), "demo", users=[], quotas=[])
    assert (r.owned, r.credential_and_acls, r.quota_entity) == (ALICE, True, (("user", "alice"),))


def test_a_gone_user_that_never_set_a_quota_keeps_its_users_quota_untouched():
    (r,) = orph.orphans(recorded(BOB), "demo", users=[], quotas=[])
    assert (r.credential_and_acls, r.quota_entity) == (True, None)


def test_live_owners_and_unrecorded_principals_are_never_touched():
    """Only recorded owners can be removed: a principal given ACLs with kafka-acls, or a user of a
    KafkaUser the operator never applied, is not in the record and so not in any removal."""
    live = [user("alice", "u-alice", quotas={"producerByteRate": 1}), user("bob", "u-bob"), user("carol", "u-carol")]
    assert orph.orphans(recorded(ALICE, BOB), "demo", users=live, quotas=[quota("etl-q", "q-etl", {"clientId": "etl"})]) == []
    assert orph.orphans({}, "demo", users=[], quotas=[]) == []


def test_a_user_recreated_under_the_same_name_keeps_what_the_new_one_claims():
    """Deleted and re-created while the operator was down: the old uid is gone, but the new
    KafkaUser of that name holds the credential, ACLs and (with spec.quotas) the quota now."""
    (r,) = orph.orphans(recorded(ALICE), "demo", users=[user("alice", "u-alice-2", quotas={"producerByteRate": 1})], quotas=[])
    assert (r.credential_and_acls, r.quota_entity) == (False, None)
    # without spec.quotas the new one does not claim the quota: the old one's goes
    (r,) = orph.orphans(recorded(ALICE), "demo", users=[user("alice", "u-alice-2")], quotas=[])
    assert (r.credential_and_acls, r.quota_entity) == (False, (("user", "alice"),))


def test_a_user_being_deleted_or_moved_to_another_cluster_is_gone_from_this_one():
    (r,) = orph.orphans(recorded(BOB), "demo", users=[user("bob", "u-bob", deleting=True)], quotas=[])
    assert r.credential_and_acls
    (r,) = orph.orphans(recorded(BOB), "demo", users=[user("bob", "u-bob", cluster_name="other")], quotas=[])
    assert r.credential_and_acls


def test_a_gone_client_quota_loses_its_entity_unless_a_live_resource_claims_it():
    (r,) = orph.orphans(recorded(ETL), "demo", users=[], quotas=[])
    assert (r.credential_and_acls, r.quota_entity) == (False, (("client-id", "etl"),))
    (r,) = orph.orphans(recorded(ETL), "demo", users=[], quotas=[quota("etl-2", "q-etl-2", {"clientId": "etl"})])
    assert r.quota_entity is None
    # a live ClientQuota of the user's entity keeps a gone KafkaUser's quota in place
    (r,) = orph.orphans(recorded(ALICE), "demo", users=[], quotas=[quota("a-q", "q-a", {"user": "alice"})])
    assert (r.credential_and_acls, r.quota_entity) == (True, None)


def test_the_record_round_trips_and_a_users_quota_flag_only_turns_on():
    owned = recorded(ALICE, BOB, ETL)
    assert orph.decode({"data": orph.encode(owned)}) == owned
    assert orph.decode({"data": {orph.RECORD_KEY: "not json"}}) == {} and orph.decode(None) == {}
    assert orph.with_entry(owned, BOB) is None  # unchanged: nothing to write
    assert orph.with_entry(owned, orph.user_entry(user("alice", "u-alice"), quota=False)) is None
    assert orph.with_entry(owned, orph.user_entry(user("bob", "u-bob"), quota=True))["u-bob"].quota
    assert set(orph.without(owned, ["u-bob"])) == {"u-alice", "q-etl"}


def test_the_condition_says_what_failed_and_turns_true_once_removed():
    failed = orph.removed_condition([], [], [(ALICE, "unreachable")], generation=1, now=NOW)
    assert (failed["type"], failed["status"], failed["reason"]) == ("OrphansRemoved", "False", "RemovalFailed")
    assert "KafkaUser alice (uid u-alice): unreachable" in failed["message"]
    assert orph.removed_condition([], [], [], generation=1, now=NOW) is None  # never had an orphan: no condition
    done = orph.removed_condition([failed], [ALICE], [], generation=1, now=NOW)
    assert (done["status"], done["reason"]) == ("True", "Removed") and "alice" in done["message"]
    gone = orph.removed_condition([failed], [], [], generation=1, now=NOW)  # removed by the deletion handler
    assert (gone["status"], gone["reason"]) == ("True", "NothingLeft")
    assert orph.removed_condition([done], [], [], generation=1, now=NOW) is None
    assert [e.reason for e in ev.orphan_events(None, failed)] == [ev.ORPHAN_REMOVAL_FAILED]
    assert ev.orphan_events(failed, failed) == []  # a retry that fails the same way: no new Event
    assert [(e.type, e.reason) for e in ev.orphan_events(failed, done)] == [("Normal", ev.ORPHANS_REMOVED)]


def test_the_clusters_status_writes_keep_the_condition(owner):
    kept = orph.removed_condition([], [], [(ALICE, "unreachable")], generation=1, now=NOW)
    status = kafka_cluster_status(owner, replicas=1, port=9092, config_hash=None, statefulset=None,
                                  previous={"conditions": [kept]}, now=NOW)
    assert kept in status["conditions"]


class MergeKube(EventKube):
    """Status writes as the API server does them: a merge patch of .status."""

    async def patch_status(self, kind, namespace, name, status):
        self.statuses.append((kind, name, status))
        self.objects[(kind, namespace, name)].setdefault("status", {}).update(status)
        return self.objects[(kind, namespace, name)]


@pytest.fixture
def admin(monkeypatch):
    """kafka_admin as a recorder; `fail` makes every call raise AdminError."""
    calls, state = [], {"fail": False}

    def recorder(name):
        async def call(bootstrap, *args):
            if state["fail"]:
                raise kafka_admin.AdminError("cluster unreachable")
            calls.append((name, *args[:-1]))
            return [("acl-of", args[0])] if name == "describe_acls" else None
        return call

    async def brokers(bootstrap, auth):
        if state["fail"]:
            raise kafka_admin.AdminError("cluster unreachable")
        return [kafka_admin.BrokerAddress(1, "demo-broker-0", 9092)]

    for name in ("alter_scram_credential", "describe_acls", "delete_acls", "alter_client_quota"):
        monkeypatch.setattr(kafka_admin, name, recorder(name))
    monkeypatch.setattr(kafka_admin, "brokers", brokers)
    return calls, state


async def test_the_pass_retries_a_failed_removal_and_reports_it_on_the_cluster(admin):
    calls, state = admin
    cl = cluster()
    cl["status"] = {"bootstrapServers": "demo-bootstrap.ns.svc:9092", "conditions": []}
    kube = MergeKube([cl, user("bob", "u-bob")])  # bob lives; alice and etl-q were deleted unseen
    memo = memo_for(kube)
    for entry in (ALICE, BOB, ETL):
        await pass_.record(kube, "ns", "demo", entry)
    owned_cm = kube.objects[("ConfigMap", "ns", "demo-operator-owned")]
    assert owned_cm["metadata"]["ownerReferences"][0]["uid"] == cl["metadata"]["uid"]

    state["fail"] = True
    await pass_.remove_orphans(memo, "ns", "demo")
    cond = next(c for c in kube.objects[("KafkaCluster", "ns", "demo")]["status"]["conditions"]
                if c["type"] == "OrphansRemoved")
    assert (cond["status"], cond["reason"]) == ("False", "RemovalFailed") and "alice" in cond["message"]
    assert kube.reasons() == ["OrphanRemovalFailed"]
    assert set(json.loads(kube.objects[("ConfigMap", "ns", "demo-operator-owned")]["data"]["owners.json"])) == {
        "u-alice", "u-bob", "q-etl"}  # kept, to be retried

    state["fail"] = False
    await pass_.remove_orphans(memo, "ns", "demo")
    removal = {"producer_byte_rate": None, "consumer_byte_rate": None, "request_percentage": None}
    assert calls == [("alter_client_quota", {"client-id": "etl"}, removal),
                     ("alter_scram_credential", "alice", 2, None), ("describe_acls", "User:alice"),
                     ("delete_acls", [("acl-of", "User:alice")]), ("alter_client_quota", {"user": "alice"}, removal)]
    assert set(json.loads(kube.objects[("ConfigMap", "ns", "demo-operator-owned")]["data"]["owners.json"])) == {"u-bob"}
    cond = next(c for c in kube.objects[("KafkaCluster", "ns", "demo")]["status"]["conditions"]
                if c["type"] == "OrphansRemoved")
    assert (cond["status"], cond["reason"]) == ("True", "Removed")
    assert kube.reasons() == ["OrphanRemovalFailed", "OrphansRemoved"]
    calls.clear()
    await pass_.remove_orphans(memo, "ns", "demo")  # nothing left: nothing sent, nothing written
    assert calls == [] and kube.reasons() == ["OrphanRemovalFailed", "OrphansRemoved"]
