"""Controlled shutdown (Kafka's): before a broker stops, the partitions it leads move to other
in-sync replicas, so clients see a leader change (NOT_LEADER_OR_FOLLOWER, then the new leader)
instead of partitions without a leader until its Lease expires.

The broker announces it on its registration (`store.announce_shutdown`: an annotation on its
Lease); the controller then elects it nowhere, moves its leaderships to live in-sync replicas
that are not stopping and takes it out of ISRs (controller/planner.py). The broker waits until
nothing it leads could move any more (moved, or no eligible replica: everyone else is stopping
too, or it is alone in the ISR), or for the timeout, and then stops anyway.
"""

from __future__ import annotations

import asyncio
import logging
import time

from broker.metadata.store import MetadataError, MetadataImage, MetadataStore, eligible_brokers

log = logging.getLogger(__name__)

POLL_S = 0.2
EXAMPLES = 3


def movable_leaderships(image: MetadataImage, node_id: int) -> list[str]:
    """Partitions `node_id` leads that another broker could take over: one in the ISR, live and
    not shutting down."""
    others = eligible_brokers(image.brokers) - {node_id}
    if not others:
        return []
    return [f"{name}-{i}" for name, topic in image.topics.items() for i, s in enumerate(topic.assignment or ())
            if s.leader == node_id and any(r in others for r in s.isr)]


async def hand_over(store: MetadataStore, node_id: int, timeout_s: float) -> list[str]:
    """Announce the shutdown and wait (at most `timeout_s`) for the leaderships to move; returns
    the partitions still led here that could have moved (empty: all handed over)."""
    if timeout_s <= 0:
        return []
    deadline = time.monotonic() + timeout_s
    try:
        await asyncio.wait_for(store.announce_shutdown(), timeout_s)
    except (MetadataError, asyncio.TimeoutError) as e:
        log.warning("controlled shutdown: cannot announce it (%s); stopping without handing over", e or "timeout")
        return movable_leaderships(store.image, node_id)
    pending = movable_leaderships(store.image, node_id)
    if pending:
        log.info("controlled shutdown: waiting up to %.0fs for %d partition(s) led here to move to other "
                 "in-sync replicas", timeout_s, len(pending))
    while pending and time.monotonic() < deadline:
        await asyncio.sleep(POLL_S)
        pending = movable_leaderships(store.image, node_id)
    if pending:
        log.warning("controlled shutdown: %d partition(s) still led here after %.0fs (%s%s); stopping anyway",
                    len(pending), timeout_s, ", ".join(pending[:EXAMPLES]), ", ..." if len(pending) > EXAMPLES else "")
    else:
        log.info("controlled shutdown: nothing led here can move any more")
    return pending
