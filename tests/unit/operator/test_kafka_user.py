"""KafkaUser's pure builders (builders/kafka_user.py), its spec model, and the handler's logic
against a fake API server and a recording admin client (the wire side runs against a real broker
in tests/e2e/test_operator_kafka_user.py)."""

from __future__ import annotations

import base64
import hashlib

import pytest

from flotilla_operator import handlers
from flotilla_operator.builders import kafka_user as ku
from flotilla_operator.api.common import parse_spec
from flotilla_operator.api.kafka_user import KAFKA_USER

from tests.unit.operator.test_operator_handlers import FakeKube, cluster, memo_for

SPEC = {"clusterRef": {"name": "demo"}, "authentication": {"type": "scram-sha-512"},
        "authorization": {"acls": [
            {"resource": {"type": "topic", "name": "orders", "patternType": "prefix"}, "operations": ["Write", "Describe"]},
            {"resource": {"type": "group", "name": "g"}, "operations": ["Read"], "type": "deny", "host": "10.0.0.1"},
            {"resource": {"type": "cluster"}, "operations": ["IdempotentWrite"]}]},
        "quotas": {"producerByteRate": 1024, "requestPercentage": 55.5}}


def test_each_operation_is_one_binding_in_kafkas_codes():
    got = ku.desired_acls("app", SPEC)
    assert got == {
        ku.AclBinding(2, "orders", 4, "User:app", "*", 4, 3), ku.AclBinding(2, "orders", 4, "User:app", "*", 8, 3),
        ku.AclBinding(3, "g", 3, "User:app", "10.0.0.1", 3, 2),
        ku.AclBinding(4, "kafka-cluster", 3, "User:app", "*", 12, 3)}


def test_the_acl_diff_makes_git_the_truth():
    desired = ku.desired_acls("app", SPEC)
    stray = ku.AclBinding(2, "payments", 3, "User:app", "*", 3, 3)
    read = ku.AclBinding(3, "g", 3, "User:app", "10.0.0.1", 3, 2)
    create, delete = ku.acl_changes(desired, [read, stray])
    assert set(create) == desired - {read} and delete == [stray]
    assert ku.acl_changes(desired, desired) == ([], [])


def test_quotas_are_owned_only_when_set_or_set_before():
    assert ku.quota_ops(SPEC, False) == {"producer_byte_rate": 1024.0, "consumer_byte_rate": None,
                                         "request_percentage": 55.5}
    assert ku.quota_ops({}, False) is None
    assert ku.quota_ops({}, True) == {"producer_byte_rate": None, "consumer_byte_rate": None, "request_percentage": None}
    assert ku.applied_quotas(ku.quota_ops(SPEC, False)) == {"producerByteRate": 1024, "requestPercentage": 55.5}


def test_the_secret_holds_what_a_client_needs_and_is_owned_by_the_user():
    body = {"apiVersion": "flotilla.io/v1alpha1", "metadata": {"name": "app", "namespace": "ns", "uid": "u-9"}, "spec": SPEC}
    secret = ku.build_secret(body, 'p"w')
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data["username"] == "app" and data["password"] == 'p"w'
    assert data["sasl.jaas.config"] == ('org.apache.kafka.common.security.scram.ScramLoginModule required '
                                        'username="app" password="p\\"w";')
    ref = secret["metadata"]["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("KafkaUser", "u-9", True)
    assert ku.foreign_secret(secret, body) is None
    other = {"metadata": {"name": "app", "ownerReferences": []}}
    assert "not this KafkaUser's" in ku.foreign_secret(other, body)


def test_the_salted_password_is_kafkas_hi():
    salt, salted, iterations = ku.salted_upsertion("pw", salt=b"s" * 32)
    assert salted == hashlib.pbkdf2_hmac("sha512", b"pw", b"s" * 32, 4096) and iterations == 4096
    assert ku.salted_upsertion("pw")[0] != ku.salted_upsertion("pw")[0]


def test_the_model_names_the_bad_field():
    parse_spec(KAFKA_USER, SPEC)
    bad = {**SPEC, "authorization": {"acls": [{"resource": {"type": "topic"}, "operations": ["Read"]}]}}
    with pytest.raises(ValueError, match="spec.authorization.acls.*resource.name is required"):
        parse_spec(KAFKA_USER, bad)
    with pytest.raises(ValueError, match="spec.authentication.type"):
        parse_spec(KAFKA_USER, {**SPEC, "authentication": {"type": "plain"}})
    with pytest.raises(ValueError, match="operations"):
        parse_spec(KAFKA_USER, {**SPEC, "authorization": {"acls": [
            {"resource": {"type": "topic", "name": "t"}, "operations": ["Fly"]}]}})


async def test_the_handler_creates_the_secret_once_and_converges_acls(monkeypatch):
    from flotilla_operator.clients import kafka_admin

    user = {"apiVersion": "flotilla.io/v1alpha1", "kind": "KafkaUser",
            "metadata": {"name": "app", "namespace": "ns", "uid": "u-9", "generation": 1}, "spec": SPEC}
    cl = cluster()
    cl["status"] = {"bootstrapServers": "demo-bootstrap.ns.svc:9092"}
    kube = FakeKube([user, cl])
    held_acls = {ku.AclBinding(2, "old", 3, "User:app", "*", 3, 3)}
    creds, quotas = {}, {}

    async def mechanisms(bootstrap, name, auth):
        return set(creds.get(name, ()))

    async def alter_scram(bootstrap, name, mechanism, upsert, auth):
        creds.setdefault(name, set()).add(mechanism)
        creds.setdefault("upserts", []).append(upsert)

    async def describe(bootstrap, principal, auth):
        return [tuple(b) for b in held_acls]

    async def create(bootstrap, bindings, auth):
        held_acls.update(ku.AclBinding._make(b) for b in bindings)

    async def delete(bootstrap, bindings, auth):
        held_acls.difference_update(ku.AclBinding._make(b) for b in bindings)

    async def alter_quota(bootstrap, entity, ops, auth):
        quotas[tuple(entity.items())] = ops

    for name, fn in {"scram_mechanisms": mechanisms, "alter_scram_credential": alter_scram, "describe_acls": describe,
                     "create_acls": create, "delete_acls": delete, "alter_client_quota": alter_quota}.items():
        monkeypatch.setattr(kafka_admin, name, fn)
    memo = memo_for(kube)
    await handlers.kafkauser_changed(namespace="ns", name="app", memo=memo)
    secret = kube.objects[("Secret", "ns", "app")]
    password = base64.b64decode(secret["data"]["password"]).decode()
    salt, salted, _ = creds["upserts"][0]
    assert salted == hashlib.pbkdf2_hmac("sha512", password.encode(), salt, 4096)
    assert held_acls == ku.desired_acls("app", SPEC)
    assert quotas[(("user", "app"),)]["producer_byte_rate"] == 1024.0
    status = kube.objects[("KafkaUser", "ns", "app")]["status"]
    assert (status["username"], status["secret"], status["observedGeneration"]) == ("app", "app", 1)
    assert status["conditions"][0]["status"] == "True" and status["quotas"] == {"producerByteRate": 1024,
                                                                                "requestPercentage": 55.5}
    # Again: the same password, no new credential; an ACL removed in Git goes.
    kube.objects[("KafkaUser", "ns", "app")]["spec"] = {**SPEC, "authorization": {"acls": SPEC["authorization"]["acls"][:1]}}
    await handlers.kafkauser_changed(namespace="ns", name="app", memo=memo)
    assert len(creds["upserts"]) == 1
    assert kube.objects[("Secret", "ns", "app")]["data"]["password"] == secret["data"]["password"]
    assert held_acls == ku.desired_acls("app", {"authorization": {"acls": SPEC["authorization"]["acls"][:1]}})


def test_the_example_is_valid():
    from pathlib import Path

    import yaml

    doc = yaml.safe_load((Path(__file__).resolve().parents[3] / "examples" / "kafkauser.yaml").read_text())
    parse_spec(KAFKA_USER, doc["spec"])
    bindings = ku.desired_acls(doc["metadata"]["name"], doc["spec"])
    assert len(bindings) == 5 and {b.permission for b in bindings} == {2, 3}


def test_no_finalizer_on_kafka_users():
    """Deletion is handled on the DELETED event: kopf would put a finalizer on every KafkaUser for
    a deletion handler, timer or daemon, holding namespace deletions while the operator is away."""
    import kopf

    registry = kopf.get_default_registry()
    resource = kopf.Resource("flotilla.io", "v1alpha1", "kafkausers")
    needing = [h for reg in (registry._changing, registry._spawning) for h in reg._handlers
               if h.requires_finalizer and h.selector is not None and h.selector.check(resource)]
    assert needing == []
    assert any(h.selector is not None and h.selector.check(resource) for h in registry._watching._handlers)
