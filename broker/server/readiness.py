"""Readiness (/readyz): is this broker back in step with the cluster?

A broker that answers on its port may still be catching up after a restart: the partitions it
holds elect leaders and let it back into their ISR only once it has fetched what it missed. The
StatefulSet's readinessProbe asks this rule, so a rolling update moves on to the next broker only
when the restarted one is registered and, in the metadata image, in the ISR of every partition it
is a replica of, each of which has a leader. Taking down the next broker earlier could leave a
partition with fewer in-sync replicas than min.insync.replicas, or none.

Liveness stays on /healthz: a broker catching up is healthy and must not be restarted for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.metadata.store import MetadataImage

#: Partitions named in a not-ready answer; the count covers the rest.
EXAMPLES = 3


@dataclass(frozen=True)
class Readiness:
    ready: bool
    text: str  # one line for the probe's log and for people running curl


NOT_STARTED = Readiness(False, "starting or stopping\n")


def replica_readiness(image: MetadataImage, node_id: int) -> Readiness:
    """Ready when `node_id` is registered and every partition with it among its replicas has a
    leader and has it in the ISR (replicas a reassignment is adding excepted: they start empty)."""
    if node_id not in image.brokers:
        return Readiness(False, f"node {node_id} is not registered in the cluster metadata\n")
    held = 0
    out_of_isr: list[str] = []
    leaderless: list[str] = []
    for name, topic in image.topics.items():
        for index, state in enumerate(topic.assignment or ()):
            if node_id not in state.replicas or node_id in state.adding:
                continue  # a replica being added by a reassignment is copying, not behind
            held += 1
            if state.leader < 0:
                leaderless.append(f"{name}-{index}")
            elif node_id not in state.isr:
                out_of_isr.append(f"{name}-{index}")
    behind = len(out_of_isr) + len(leaderless)
    if not behind:
        return Readiness(True, f"ok: in the ISR of all {held} partition(s) it holds\n")
    parts = []
    if out_of_isr:
        parts.append(f"not in the ISR of {len(out_of_isr)} ({', '.join(out_of_isr[:EXAMPLES])}"
                     f"{', ...' if len(out_of_isr) > EXAMPLES else ''})")
    if leaderless:
        parts.append(f"no leader for {len(leaderless)} ({', '.join(leaderless[:EXAMPLES])}"
                     f"{', ...' if len(leaderless) > EXAMPLES else ''})")
    return Readiness(False, f"{behind} of {held} partition(s) behind: {'; '.join(parts)}\n")
