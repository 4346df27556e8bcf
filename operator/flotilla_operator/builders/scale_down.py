"""Scale-down safety: never remove a broker that still holds partition replicas.

A StatefulSet scales down by deleting its highest ordinals, and a broker's node.id is its ordinal,
so lowering spec.replicas from 5 to 3 removes nodes 3 and 4. If either is still a replica of a
partition (a KafkaTopic's status.assignment), removing it would lose that copy, or the only one.
The operator then keeps the StatefulSet at the smallest size that removes no replica holder and
reports ScaleDownBlocked until they hold none (moved or deleted). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Topic partitions named in the condition's message; the count covers the rest.
EXAMPLES = 5

SCALE_DOWN_BLOCKED = "ScaleDownBlocked"
BLOCKED_REASON = "ReplicasOnRemovedBrokers"


@dataclass(frozen=True)
class ScaleDecision:
    """How many brokers the StatefulSet may run now, and why not fewer."""

    replicas: int
    blocked_nodes: tuple[int, ...] = ()  # brokers spec.replicas removes that still hold replicas
    held: tuple[str, ...] = field(default=())  # "<topic>-<partition>" they hold, sorted

    @property
    def blocked(self) -> bool:
        return bool(self.blocked_nodes)

    def message(self) -> str:
        if not self.blocked:
            return ""
        nodes = ", ".join(str(n) for n in self.blocked_nodes)
        shown = ", ".join(self.held[:EXAMPLES]) + (", ..." if len(self.held) > EXAMPLES else "")
        return (f"not removing broker(s) {nodes}: they still hold replicas of {len(self.held)} "
                f"partition(s) ({shown}); the scale-down continues once they hold none; keeping "
                f"{self.replicas} brokers")


def replica_holders(topics: list[dict[str, Any]]) -> dict[int, list[str]]:
    """node id -> the "<topic>-<partition>" it is a replica of, from KafkaTopics' status."""
    out: dict[int, list[str]] = {}
    for obj in topics:
        name = (obj.get("spec") or {}).get("topicName") or obj["metadata"]["name"]
        for index, part in enumerate(((obj.get("status") or {}).get("assignment")) or ()):
            for node in part.get("replicas") or ():
                out.setdefault(int(node), []).append(f"{name}-{index}")
    return out


def scale_decision(current: int | None, desired: int, topics: list[dict[str, Any]]) -> ScaleDecision:
    """`current`: the StatefulSet's spec.replicas (None if it does not exist yet); `desired`: the
    KafkaCluster's spec.replicas; `topics`: the cluster's KafkaTopics. Growing, or creating, is
    never held back; shrinking stops above the highest removed ordinal that holds a replica."""
    if current is None or desired >= current:
        return ScaleDecision(desired)
    holders = replica_holders(topics)
    blocked = tuple(sorted(n for n in holders if desired <= n < current))
    if not blocked:
        return ScaleDecision(desired)
    held = tuple(sorted({p for n in blocked for p in holders[n]}, key=_partition_order))
    return ScaleDecision(max(blocked) + 1, blocked, held)


def _partition_order(text: str) -> tuple[str, int]:
    topic, _, index = text.rpartition("-")
    return topic, int(index)
