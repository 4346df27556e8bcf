"""What the operator has put in a cluster's Kafka on behalf of a resource, and which of it to
remove once that resource is gone. Pure: no I/O (reconcilers/orphans.py reads and writes).

There is no finalizer (reconcilers/loops.py says why), so a KafkaUser or ClientQuota deleted while
the operator is away leaves its credential, ACLs or quota in the brokers. The operator therefore
records, in the ConfigMap `<cluster>-operator-owned` and before it first applies anything, which
resource (by uid) owns which Kafka user or quota entity; a pass at start and at every quota resync
removes what a recorded resource owned once it no longer exists, and nothing the record does not
name (a principal's ACLs written with kafka-acls stay, as in Strimzi's user operator).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Iterable, Mapping

from broker.metadata import names

from ..status import ORPHANS_REMOVED, condition
from .client_quota import CLIENT_QUOTA, KAFKA_USER, _claim, entity_of
from .common import Owner, metadata

RECORD_KEY = "owners.json"
CONDITION = ORPHANS_REMOVED
Entity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class Owned:
    """One resource's share of the cluster: a KafkaUser's user (its SCRAM credential and the ACLs
    of User:<user>; with `quota`, also that user entity's quota), or a ClientQuota's entity."""

    kind: str
    name: str
    uid: str
    user: str | None = None
    quota: bool = False
    entity: Entity | None = None

    def describe(self) -> str:
        return f"{self.kind} {self.name} (uid {self.uid})"


@dataclass(frozen=True)
class Removal:
    """What to remove for a gone owner: nothing that a live resource of the cluster claims now."""

    owned: Owned
    credential_and_acls: bool
    quota_entity: Entity | None


def record_name(cluster: str) -> str:
    return names.operator_owned_name(cluster)


def entity_key(entity: Mapping[str, str | None]) -> Entity:
    return tuple(sorted(entity.items()))


def user_entry(body: Mapping[str, Any], *, quota: bool) -> Owned:
    meta = body["metadata"]
    return Owned(KAFKA_USER, meta["name"], meta["uid"], user=meta["name"], quota=quota)


def quota_entry(body: Mapping[str, Any]) -> Owned:
    meta = body["metadata"]
    return Owned(CLIENT_QUOTA, meta["name"], meta["uid"], entity=entity_key(entity_of(body.get("spec") or {})))


def decode(configmap: Mapping[str, Any] | None) -> dict[str, Owned]:
    """uid -> Owned from the record (an unreadable record reads as empty: nothing is removed)."""
    try:
        raw = json.loads(((configmap or {}).get("data") or {}).get(RECORD_KEY) or "{}")
        out = {}
        for uid, e in raw.items():
            entity = e.get("entity")
            out[uid] = Owned(e["kind"], e["name"], uid, user=e.get("user"), quota=bool(e.get("quota")),
                             entity=None if entity is None else entity_key(entity))
        return out
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}


def encode(owned: Mapping[str, Owned]) -> dict[str, str]:
    raw = {}
    for uid, o in sorted(owned.items()):
        e: dict[str, Any] = {"kind": o.kind, "name": o.name}
        if o.user is not None:
            e.update(user=o.user, quota=o.quota)
        if o.entity is not None:
            e["entity"] = dict(o.entity)
        raw[uid] = e
    return {RECORD_KEY: json.dumps(raw, sort_keys=True)}


def build_record(owner: Owner, owned: Mapping[str, Owned]) -> dict[str, Any]:
    """The record ConfigMap, owned by the KafkaCluster: it goes with the cluster and its stores."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(owner, record_name(owner.name)),
            "data": encode(owned)}


def with_entry(owned: Mapping[str, Owned], entry: Owned) -> dict[str, Owned] | None:
    """The record with `entry` added, or None when it already says so. A user's quota flag only
    ever turns on while it lives: once set, its quota may be in the brokers."""
    old = owned.get(entry.uid)
    if old is not None and old.quota:
        entry = replace(entry, quota=True)
    if old == entry:
        return None
    return {**owned, entry.uid: entry}


def without(owned: Mapping[str, Owned], uids: Iterable[str]) -> dict[str, Owned]:
    gone = set(uids)
    return {uid: o for uid, o in owned.items() if uid not in gone}


def _of_cluster(bodies: Iterable[Mapping[str, Any]], cluster: str) -> list[Mapping[str, Any]]:
    return [b for b in bodies if not b["metadata"].get("deletionTimestamp")
            and ((b.get("spec") or {}).get("clusterRef") or {}).get("name") == cluster]


def orphans(owned: Mapping[str, Owned], cluster: str, users: Iterable[Mapping[str, Any]],
            quotas: Iterable[Mapping[str, Any]]) -> list[Removal]:
    """The removals for every recorded owner that is no longer a live resource of `cluster` (gone,
    re-created with another uid, being deleted, or pointed at another cluster). What a live
    resource of the cluster claims now is kept: a KafkaUser of the same name keeps the credential
    and ACLs, and the live owner of a quota entity keeps its quota; such an owner is dropped from
    the record with nothing removed. `users` and `quotas` are the namespace's, listed after the
    record was read (a resource recorded later is then listed too)."""
    users, quotas = _of_cluster(users, cluster), _of_cluster(quotas, cluster)
    live = {b["metadata"]["uid"] for b in (*users, *quotas)}
    user_names = {b["metadata"]["name"] for b in users}
    claimed = {c[2] for c in (*(_claim(KAFKA_USER, dict(b)) for b in users),
                              *(_claim(CLIENT_QUOTA, dict(b)) for b in quotas)) if c is not None}
    out = []
    for uid, o in sorted(owned.items()):
        if uid in live:
            continue
        entity = o.entity if o.kind == CLIENT_QUOTA else ((("user", o.user),) if o.quota else None)
        out.append(Removal(o, credential_and_acls=o.kind == KAFKA_USER and o.user not in user_names,
                           quota_entity=None if entity is None or entity in claimed else entity))
    return out


def removed_condition(previous: list[dict[str, Any]] | None, removed: list[Owned],
                      failed: list[tuple[Owned, str]], *, generation: int, now: datetime) -> dict[str, Any] | None:
    """OrphansRemoved after a pass: False (RemovalFailed, naming the owners left and why) while a
    removal fails, True once a pass removed what it found; None (no change) for a pass with
    nothing to do, so a cluster that never had an orphan carries no such condition."""
    old = next((c for c in previous or () if c.get("type") == CONDITION), None)
    if failed:
        left = "; ".join(f"{o.describe()}: {why}" for o, why in failed)
        return condition(CONDITION, False, "RemovalFailed",
                         f"{len(failed)} gone resource(s) keep what they owned in Kafka, retried at the next "
                         f"resync: {left}"[:2048], generation=generation, now=now, previous=previous)
    if removed:
        what = ", ".join(o.describe() for o in removed)
        return condition(CONDITION, True, "Removed", f"removed what gone resources owned: {what}"[:2048],
                         generation=generation, now=now, previous=previous)
    if old is not None and old.get("status") == "False":
        return condition(CONDITION, True, "NothingLeft", "no gone resource owns anything in Kafka",
                         generation=generation, now=now, previous=previous)
    return None


def removal_summary(r: Removal) -> str:
    parts = ["credential and ACLs of user " + str(r.owned.user)] if r.credential_and_acls else []
    if r.quota_entity is not None:
        parts.append("quota of " + ",".join(f"{k}={'<default>' if v is None else v}" for k, v in r.quota_entity))
    return f"{r.owned.describe()}: " + ("; ".join(parts) or "nothing (a live resource owns it now)")
