"""Pure functions from ClientQuota resources to what the cluster must hold (KIP-13).

A ClientQuota owns every quota key it can set for its entity: keys its spec leaves out are
removed, so editing a resource and deleting it are both exact. Two resources naming the same
entity of the same cluster are a conflict: the oldest one (creation time, then kind, then name)
owns the entity and is applied; the others are reported, never applied, so the cluster never flips
between them. A KafkaUser with `spec.quotas` names its own user entity, so it conflicts with a
ClientQuota of that user (without a client id) in the same way.
"""

from __future__ import annotations

from typing import Any, Iterable

# Kafka's quota keys and the spec fields that set them.
SPEC_FIELDS = {"producer_byte_rate": "producerByteRate", "consumer_byte_rate": "consumerByteRate",
               "request_percentage": "requestPercentage"}
MANAGED_KEYS = tuple(SPEC_FIELDS)
WHOLE_NUMBER_KEYS = ("producer_byte_rate", "consumer_byte_rate")


def entity_of(spec: dict[str, Any]) -> dict[str, str | None]:
    """The Kafka entity (type -> name, None = default) of a ClientQuota's spec: `user` and/or
    `client-id`, each present only when the spec names it (or its default)."""
    ent = spec.get("entity") or {}
    out: dict[str, str | None] = {}
    if ent.get("defaultUser") or ent.get("user") is not None:
        out["user"] = None if ent.get("defaultUser") else ent["user"]
    if ent.get("default") or ent.get("clientId") is not None:
        out["client-id"] = None if ent.get("default") else ent["clientId"]
    return out


def entity_key(namespace: str, spec: dict[str, Any]) -> tuple:
    cluster = (spec.get("clusterRef") or {}).get("name")
    return (namespace, cluster, tuple(sorted(entity_of(spec).items(), key=lambda kv: kv[0])))


def desired_ops(spec: dict[str, Any]) -> dict[str, float | None]:
    """Every managed key: its value from the spec, or None (remove) when the spec leaves it out."""
    return {key: _num(spec.get(field)) for key, field in SPEC_FIELDS.items()}


def removal_ops() -> dict[str, None]:
    return {k: None for k in MANAGED_KEYS}


def _num(v: Any) -> float | None:
    return None if v is None else float(v)


CLIENT_QUOTA, KAFKA_USER = "ClientQuota", "KafkaUser"


def _claim(kind: str, body: dict[str, Any]) -> tuple | None:
    """The (namespace, cluster, entity) whose quotas a resource sets: a ClientQuota its entity; a
    KafkaUser with `spec.quotas` its own user (without it, none)."""
    meta, spec = body["metadata"], body.get("spec") or {}
    if kind == KAFKA_USER:
        if spec.get("quotas") is None:
            return None
        return (meta["namespace"], (spec.get("clusterRef") or {}).get("name"), (("user", meta["name"]),))
    return entity_key(meta["namespace"], spec)


def owner_of(body: dict[str, Any], peers: Iterable[dict[str, Any]], users: Iterable[dict[str, Any]] = (),
             kind: str = CLIENT_QUOTA) -> tuple[str, str]:
    """(kind, name) of the resource that owns the quotas `body` (a `kind`) sets: the oldest of the
    ClientQuotas (`peers`) and KafkaUsers with quotas (`users`) naming the same entity of the same
    cluster, this one included; ties by kind, then name, so every run decides the same. A resource
    being deleted owns nothing, unless it is `body` (its deletion asks whether it was the owner)."""
    key = _claim(kind, body)
    me = (kind, body["metadata"]["name"])
    if key is None:
        return me
    same = {(k, b["metadata"]["name"]): b for k, group in ((CLIENT_QUOTA, peers), (KAFKA_USER, users)) for b in group
            if not b["metadata"].get("deletionTimestamp") and _claim(k, b) == key}
    same[me] = body
    return min(same, key=lambda kn: (same[kn]["metadata"].get("creationTimestamp") or "", kn[0], kn[1]))


def applied_matches(desired: dict[str, float | None], held: dict[str, float]) -> bool:
    """Whether a broker holds exactly the desired managed keys."""
    return all(held.get(k) == v for k, v in desired.items())


def broker_status(node_id: int, held: dict[str, float] | None, error: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"nodeId": node_id}
    for key, field in SPEC_FIELDS.items():
        if held is not None and key in held:
            out[field] = int(held[key]) if key in WHOLE_NUMBER_KEYS else held[key]
    if error:
        out["lastError"] = error
    return out
