"""Pure functions from a KafkaUser to what the cluster and the API server must hold: the user's
Secret, its ACL bindings (and the difference from what the brokers hold), its quota operations.

ACLs: Git is the truth. Every ACL of the principal `User:<name>` that the spec does not list is
deleted, every listed one missing is created (DescribeAcls -> CreateAcls/DeleteAcls), so removing
a rule in Git removes it from the cluster. Quotas: a KafkaUser with `spec.quotas` owns every quota
key of its user entity (keys left out are removed), as a ClientQuota does; without `spec.quotas`
it leaves the entity alone, unless it set quotas before (status.quotas), which are then removed.
"""

from __future__ import annotations

import base64
import hashlib
import os
from typing import Any, Iterable, NamedTuple

from .common import CLUSTER_LABEL, MANAGED_BY

# Kafka's codes (org.apache.kafka.common.resource/acl): the wire form of kafka-acls' words.
RESOURCE_TYPES = {"topic": 2, "group": 3, "cluster": 4, "transactionalId": 5}
PATTERN_TYPES = {"literal": 3, "prefix": 4}
OPERATIONS = {"All": 2, "Read": 3, "Write": 4, "Create": 5, "Delete": 6, "Alter": 7, "Describe": 8,
              "ClusterAction": 9, "DescribeConfigs": 10, "AlterConfigs": 11, "IdempotentWrite": 12}
PERMISSIONS = {"deny": 2, "allow": 3}
CLUSTER_RESOURCE = "kafka-cluster"
MECHANISM = "SCRAM-SHA-512"
MECHANISM_CODE = 2  # Kafka's ScramMechanism: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
ITERATIONS = 4096
QUOTA_FIELDS = {"producer_byte_rate": "producerByteRate", "consumer_byte_rate": "consumerByteRate",
                "request_percentage": "requestPercentage"}
LABEL_USER = "flotilla.io/kafka-user"


class AclBinding(NamedTuple):
    """One ACL as the wire carries it (codes, not words), so held and desired compare exactly."""

    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


def principal(user: str) -> str:
    return f"User:{user}"


def desired_acls(user: str, spec: dict[str, Any]) -> set[AclBinding]:
    """Every binding the spec's rules stand for: one per operation."""
    out = set()
    for rule in ((spec.get("authorization") or {}).get("acls") or []):
        res = rule["resource"]
        name = CLUSTER_RESOURCE if res["type"] == "cluster" else res["name"]
        pattern = "literal" if res["type"] == "cluster" else res.get("patternType", "literal")
        for op in rule["operations"]:
            out.add(AclBinding(RESOURCE_TYPES[res["type"]], name, PATTERN_TYPES[pattern], principal(user),
                               rule.get("host", "*"), OPERATIONS[op], PERMISSIONS[rule.get("type", "allow")]))
    return out


def acl_changes(desired: Iterable[AclBinding], held: Iterable[AclBinding]) -> tuple[list[AclBinding], list[AclBinding]]:
    """(to create, to delete), each sorted: what makes the cluster hold exactly `desired`."""
    desired, held = set(desired), set(held)
    return sorted(desired - held), sorted(held - desired)


def quota_ops(spec: dict[str, Any], previously_managed: bool) -> dict[str, float | None] | None:
    """Quota keys to set (value) or remove (None) for the user entity; None: leave it alone."""
    quotas = spec.get("quotas")
    if quotas is None:
        return {k: None for k in QUOTA_FIELDS} if previously_managed else None
    return {k: None if quotas.get(f) is None else float(quotas[f]) for k, f in QUOTA_FIELDS.items()}


def jaas_config(user: str, password: str) -> str:
    """Kafka's sasl.jaas.config for a Java client (the ScramLoginModule's options quoted)."""
    def quoted(v: str) -> str:
        return v.replace("\\", "\\\\").replace('"', '\\"')

    return (f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{quoted(user)}" '
            f'password="{quoted(password)}";')


def new_password() -> str:
    return base64.urlsafe_b64encode(os.urandom(24)).decode()


def secret_name(body: dict[str, Any]) -> str:
    return body["metadata"]["name"]


def authentication(body: dict[str, Any]) -> str:
    """scram-sha-512 or tls (api/kafka_user.py KafkaUserAuthentication)."""
    return ((body.get("spec") or {}).get("authentication") or {}).get("type", "scram-sha-512")


def build_secret(body: dict[str, Any], password: str) -> dict[str, Any]:
    """A SCRAM user's Secret, ready to mount in a client pod, owned by the KafkaUser (deleted with it)."""
    user = body["metadata"]["name"]
    return _user_secret(body, {"username": user, "password": password, "sasl.jaas.config": jaas_config(user, password)})


def build_tls_secret(body: dict[str, Any], files: dict[str, str]) -> dict[str, Any]:
    """A TLS user's Secret: its key and certificate and the CA bundle to trust the brokers with
    (builders/certificates.user_certificate_files)."""
    return _user_secret(body, {"username": body["metadata"]["name"], **files})


def _user_secret(body: dict[str, Any], data: dict[str, str]) -> dict[str, Any]:
    meta, user = body["metadata"], body["metadata"]["name"]
    cluster = body["spec"]["clusterRef"]["name"]
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": secret_name(body), "namespace": meta["namespace"],
                         "labels": {**labels_for(cluster), LABEL_USER: user},
                         "ownerReferences": [{"apiVersion": body.get("apiVersion", "flotilla.io/v1alpha1"),
                                              "kind": "KafkaUser", "name": user, "uid": meta["uid"],
                                              "controller": True}]},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def labels_for(cluster: str) -> dict[str, str]:
    return {"app.kubernetes.io/managed-by": MANAGED_BY, CLUSTER_LABEL: cluster}


def password_of(secret: dict[str, Any] | None) -> str | None:
    raw = ((secret or {}).get("data") or {}).get("password")
    return base64.b64decode(raw).decode() if raw else None


def foreign_secret(secret: dict[str, Any] | None, body: dict[str, Any]) -> str | None:
    """Why an existing Secret of the user's name is not this KafkaUser's (None when it is)."""
    if secret is None:
        return None
    refs = secret["metadata"].get("ownerReferences") or []
    if any(r.get("uid") == body["metadata"]["uid"] for r in refs):
        return None
    if any(r.get("kind") == "KafkaUser" and r.get("name") == body["metadata"]["name"] for r in refs):
        return None  # an earlier KafkaUser of this name, being garbage-collected
    return f"Secret {secret['metadata']['name']} exists and is not this KafkaUser's; it is left alone"


def salted_upsertion(password: str, iterations: int = ITERATIONS, salt: bytes | None = None) -> tuple[bytes, bytes, int]:
    """(salt, salted password, iterations) as Kafka's admin client computes them client-side for
    AlterUserScramCredentials (RFC 5802's Hi(): PBKDF2-HMAC-SHA-512): the password never goes out."""
    salt = salt or os.urandom(32)
    return salt, hashlib.pbkdf2_hmac("sha512", password.encode(), salt, iterations), iterations


def applied_quotas(ops: dict[str, float | None] | None) -> dict[str, Any] | None:
    """status.quotas: the quota fields in force (None when the user entity is not managed)."""
    if ops is None or all(v is None for v in ops.values()):
        return None
    return {QUOTA_FIELDS[k]: (int(v) if k != "request_percentage" else v) for k, v in ops.items() if v is not None}
