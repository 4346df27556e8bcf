"""Pure functions from ClientQuota resources to what the cluster must hold (KIP-13).

A ClientQuota owns every quota key it can set for its entity: keys its spec leaves out are
removed, so editing a resource and deleting it are both exact. Two resources naming the same
entity of the same cluster are a conflict: the oldest one (creation time, then name) owns the
entity and is applied; the others are reported, never applied, so the cluster never flips
between them.
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


def owner_of(body: dict[str, Any], peers: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Which of the resources naming the same entity (this one included) owns it: the oldest."""
    ns = body["metadata"]["namespace"]
    key = entity_key(ns, body.get("spec") or {})
    same = [p for p in peers if not p["metadata"].get("deletionTimestamp")
            and entity_key(p["metadata"]["namespace"], p.get("spec") or {}) == key]
    if not any(p["metadata"]["name"] == body["metadata"]["name"] for p in same):
        same.append(body)
    return min(same, key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))


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
