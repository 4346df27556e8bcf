"""When the next broker may restart: the operator gates the StatefulSet's RollingUpdate.

The brokers' StatefulSet uses `podManagementPolicy: Parallel`, so that a lost broker pod is
re-created at once even while other brokers are not Ready (with OrderedReady it waits behind any
unready lower ordinal, and when the lost broker was the last in-sync replica the others stay
unready until it returns: a deadlock only a person could break). But with Parallel the
StatefulSet controller rolls the next pod as soon as the pod above it is Ready, whatever the
other brokers' state. So the operator holds the roll with `rollingUpdate.partition` and opens it
one ordinal at a time, only when every broker pod exists and is Ready and every partition of the
cluster (its KafkaTopics' status.assignment) has a leader and a full ISR: a roll never takes a
replica away from a partition that is already short of one.

Pure: the handler lists the pods and, only while a broker waits to be rolled, the KafkaTopics.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

TEMPLATE_HASH_ANNOTATION = "flotilla.io/template-hash"
REVISION_LABEL = "controller-revision-hash"
#: Partitions or brokers named in a waiting message; the count covers the rest.
EXAMPLES = 3


def template_hash(template: dict[str, Any]) -> str:
    """A pod template's digest, kept on the StatefulSet: differs from the live one while a new
    template is being applied (before the controller has computed its revision)."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:16]


def pod_ordinal(pod: dict[str, Any]) -> int | None:
    tail = pod["metadata"]["name"].rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


def pod_ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


@dataclass(frozen=True)
class RollState:
    """What the StatefulSet would roll: `hold` (its partition while nothing may roll) and the
    highest broker still on an old revision (None: nothing to roll, or not known yet)."""

    hold: int
    next_broker: int | None
    known: bool  # False while the controller has not seen the current template
    brokers: int = 0  # the StatefulSet's replicas now


@dataclass(frozen=True)
class RollDecision:
    partition: int
    waiting: str | None = None  # why the next broker is held back
    restarting: int | None = None  # the broker this partition lets the StatefulSet replace

    @property
    def blocked(self) -> bool:
        return self.waiting is not None


def roll_state(statefulset: dict[str, Any] | None, pods: list[dict[str, Any]], *, desired_template_hash: str,
               desired_replicas: int) -> RollState:
    if not statefulset:
        ordinals = [o for p in pods if (o := pod_ordinal(p)) is not None]
        if not ordinals:
            return RollState(hold=0, next_broker=None, known=True)  # a new fleet: every pod is new
        # Re-created over running pods (a podManagementPolicy change, a deleted StatefulSet): it
        # adopts them; none may be replaced before their revisions are known.
        return RollState(hold=max(desired_replicas, max(ordinals) + 1), next_broker=None, known=False)
    meta, spec, st = statefulset.get("metadata") or {}, statefulset.get("spec") or {}, statefulset.get("status") or {}
    have = int(spec.get("replicas") or 0)
    hold = max(have, desired_replicas)
    live_hash = (meta.get("annotations") or {}).get(TEMPLATE_HASH_ANNOTATION)
    seen = st.get("observedGeneration") is not None and st.get("observedGeneration") >= (meta.get("generation") or 0)
    revision = st.get("updateRevision")
    if live_hash != desired_template_hash:
        # A new template: its revision is not known yet; nothing rolls until the controller has seen it.
        return RollState(hold=hold, next_broker=None, known=False, brokers=have)
    if not seen or not revision:
        # Only the partition changed (or nothing): the controller has not caught up with the one we
        # applied, which was safe when chosen; keep it rather than close and reopen the roll.
        live = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition")
        return RollState(hold=hold if live is None else int(live), next_broker=None, known=False, brokers=have)
    outdated = [o for p in pods
                if not p["metadata"].get("deletionTimestamp")
                and (o := pod_ordinal(p)) is not None and o < have
                and (p["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision]
    return RollState(hold=hold, next_broker=max(outdated) if outdated else None, known=True, brokers=have)


def _names(items: list[str]) -> str:
    return ", ".join(items[:EXAMPLES]) + (", ..." if len(items) > EXAMPLES else "")


def isr_shortfalls(topics: list[dict[str, Any]]) -> list[str]:
    """Partitions without a leader or with a replica outside the ISR, as `<topic>-<index>`."""
    short = []
    for obj in topics:
        status = obj.get("status") or {}
        name = (obj.get("spec") or {}).get("topicName") or obj["metadata"]["name"]
        for index, part in enumerate(status.get("assignment") or []):
            replicas, isr = part.get("replicas") or [], part.get("isr") or []
            if int(part.get("leader", -1)) < 0 or not set(replicas) <= set(isr):
                short.append(f"{name}-{index}")
    return short


def unsafe_to_roll(pods: list[dict[str, Any]], replicas: int, topics: list[dict[str, Any]]) -> str | None:
    """Why restarting one more broker now could leave a partition short; None when it is safe."""
    by_ordinal = {pod_ordinal(p): p for p in pods}
    missing = [str(i) for i in range(replicas) if i not in by_ordinal]
    if missing:
        return f"broker(s) {_names(missing)} have no pod"
    terminating = [str(i) for i in range(replicas) if by_ordinal[i]["metadata"].get("deletionTimestamp")]
    if terminating:
        return f"broker(s) {_names(terminating)} are stopping"
    unready = [str(i) for i in range(replicas) if not pod_ready(by_ordinal[i])]
    if unready:
        return f"broker(s) {_names(unready)} not Ready"
    short = isr_shortfalls(topics)
    if short:
        return f"{len(short)} partition(s) without a full ISR ({_names(short)})"
    return None


def roll_partition(state: RollState, pods: list[dict[str, Any]], topics: list[dict[str, Any]]) -> RollDecision:
    """The partition to apply: the next broker's ordinal when it may restart, one above it while
    the fleet is not whole (the StatefulSet then rolls nothing)."""
    if not state.known:
        return RollDecision(state.hold)
    if state.next_broker is None:
        return RollDecision(0)
    reason = unsafe_to_roll(pods, state.brokers, topics)
    if reason:
        return RollDecision(state.next_broker + 1, f"broker {state.next_broker} waits: {reason}")
    return RollDecision(state.next_broker, restarting=state.next_broker)
