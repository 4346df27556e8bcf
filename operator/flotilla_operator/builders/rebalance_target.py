"""The target assignment a rebalance heads for, kept in the ConfigMap `<cluster>-rebalance-plan`
from its first step to its last. Pure: no I/O.

Why it is kept rather than recomputed at each step: the planner (rebalance_plan.py) is greedy, and
planned again from a state half-way to its own target it can choose a different target, so a
rebalance that replanned as it went could copy more replicas than it announced (partitionsTotal
grew), and in the worst case move a partition twice. A rebalance is planned once, at its start, as
`kafka-reassign-partitions.sh --generate` does; later steps keep that target for every partition it
names and plan only partitions it does not (a topic created mid-way) or can no longer hold (a
partition whose replication factor changed). The finished plan stays in the ConfigMap, a record of
what the last rebalance did, until the next one replaces it; the KafkaCluster's deletion
garbage-collects it.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from dataclasses import dataclass
from typing import Any, Collection, Mapping

from broker.metadata import names

from .common import Owner, metadata

Partition = tuple[str, int]

PLAN_KEY = "plan.json"
PLAN_GZ_KEY = "plan.json.gz"
# A ConfigMap holds at most 1 MiB; a plan larger than this (about 25,000 partitions) is gzipped.
PLAIN_LIMIT = 512 * 1024


@dataclass(frozen=True)
class Target:
    """One rebalance's plan: which rebalance (startedAt, reason, brokers: as status.rebalance says)
    and each partition's target replicas, preferred leader first."""

    started_at: str
    reason: str
    brokers: tuple[int, ...]
    replicas: Mapping[Partition, tuple[int, ...]]

    def belongs_to(self, status: Mapping[str, Any]) -> bool:
        """Whether this is the plan of the rebalance `status` (status.rebalance) describes."""
        return (self.started_at == status.get("startedAt") and self.reason == status.get("reason")
                and set(self.brokers) == set(status.get("brokers") or ()))


def configmap_name(owner_name: str) -> str:
    return names.rebalance_plan_name(owner_name)


def heading(kept: Target | None, planned: Mapping[Partition, tuple[int, ...]],
            current: Mapping[Partition, tuple[int, ...]], brokers: Collection[int]) -> dict[Partition, tuple[int, ...]]:
    """The target of every partition in `planned` (a fresh plan from `current`): the kept plan's
    where it names the partition and can still hold it (same replication factor, distinct replicas,
    all on `brokers`), the fresh plan's otherwise."""
    if kept is None:
        return dict(planned)
    allowed = set(brokers)
    out = {}
    for p, fresh in planned.items():
        target = kept.replicas.get(p)
        valid = (target is not None and len(target) == len(current.get(p, ())) and len(set(target)) == len(target)
                 and set(target) <= allowed)
        out[p] = tuple(target) if valid and target is not None else tuple(fresh)
    return out


def encode(target: Target) -> dict[str, dict[str, str]]:
    """ConfigMap `data` (or `binaryData`, gzipped, when large) holding `target`."""
    topics: dict[str, dict[str, list[int]]] = {}
    for (topic, index), replicas in sorted(target.replicas.items()):
        topics.setdefault(topic, {})[str(index)] = list(replicas)
    text = json.dumps({"startedAt": target.started_at, "reason": target.reason, "brokers": list(target.brokers),
                       "topics": topics}, separators=(",", ":"), sort_keys=True)
    if len(text) <= PLAIN_LIMIT:
        return {"data": {PLAN_KEY: text}}
    return {"binaryData": {PLAN_GZ_KEY: base64.b64encode(gzip.compress(text.encode(), mtime=0)).decode()}}


def decode(configmap: Mapping[str, Any] | None) -> Target | None:
    """The plan a ConfigMap holds; None when there is none or it cannot be read (an edited or
    truncated one is ignored: the rebalance then plans afresh, as if none were kept)."""
    if not configmap:
        return None
    try:
        gz = (configmap.get("binaryData") or {}).get(PLAN_GZ_KEY)
        text = gzip.decompress(base64.b64decode(gz)).decode() if gz else (configmap.get("data") or {}).get(PLAN_KEY)
        if not text:
            return None
        raw = json.loads(text)
        replicas = {(str(topic), int(index)): tuple(int(b) for b in r)
                    for topic, parts in raw["topics"].items() for index, r in parts.items()}
        return Target(started_at=str(raw["startedAt"]), reason=str(raw["reason"]),
                      brokers=tuple(int(b) for b in raw["brokers"]), replicas=replicas)
    except (ValueError, KeyError, TypeError, AttributeError, OSError, EOFError, zlib.error):
        return None


def configmap(owner: Owner, target: Target) -> dict[str, Any]:
    """The ConfigMap, owned by the KafkaCluster, holding `target`."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(owner, configmap_name(owner.name)),
            **encode(target)}
