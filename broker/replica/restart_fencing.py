"""A restarted broker does not carry on under leader epochs granted to its previous process.

In Kafka a broker that starts again registers a new incarnation and is fenced until it catches
up: partitions it led move to another in-sync replica (leader epoch + 1, and it leaves their
ISR), or, with nobody else in sync, lose their leader (epoch + 1) and get it back when it is
unfenced (epoch + 1 again). Either way nothing is written under the epoch the old process led
with, so a follower or consumer that saw that epoch finds where it ended (OffsetForLeaderEpoch)
even if the restart lost the tail of the log. A Flotilla broker whose registration comes back
before the controller noticed it was gone (one broker; a fleet broker restarting inside its
Lease) finds itself still leader in the metadata; it makes the same change itself, right after
registering and before it serves, with a compare-and-set of each such record (as ISR updates).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from broker.metadata.store import Conflict, MetadataError, MetadataStore, PartitionState, eligible_brokers

log = logging.getLogger(__name__)

ATTEMPTS = 10
RETRY_S = 0.2


def after_restart(state: PartitionState, me: int, eligible: frozenset[int]) -> PartitionState | None:
    """The state of a partition once broker `me`, which just started again, is fenced and back:
    None if it does not lead it."""
    if state.leader != me:
        return None
    successor = next((r for r in state.replicas if r != me and r in state.isr and r in eligible), None)
    if successor is not None:
        return dataclasses.replace(state, leader=successor, leader_epoch=state.leader_epoch + 1,
                                   isr=tuple(r for r in state.isr if r != me))
    # Nobody else in sync: leader none (epoch + 1), then this broker again (epoch + 1), in one
    # write since nobody could have led in between.
    return dataclasses.replace(state, leader_epoch=state.leader_epoch + 2)


async def fence_previous_leaderships(store: MetadataStore, me: int) -> int:
    """Rewrite every partition the image still shows led by `me`; returns how many topics were
    written. A lost compare-and-set is planned again from the newer image."""
    written = 0
    for attempt in range(ATTEMPTS):
        image = store.image
        eligible = eligible_brokers(image.brokers)
        pending = []
        for record in image.topics.values():
            states = list(record.assignment or ())
            changed = False
            for i, s in enumerate(states):
                new = after_restart(s, me, eligible)
                if new is not None:
                    states[i], changed = new, True
            if changed:
                pending.append(dataclasses.replace(record, assignment=tuple(states)))
        if not pending:
            return written
        lost = False
        for record in pending:
            try:
                await store.update_topic(record)
                written += 1
            except Conflict:
                lost = True
            except MetadataError as e:
                log.warning("%s: cannot move the leader epochs of a restarted broker: %s", record.name, e)
        if not lost:
            if written:
                log.info("broker %d restarted: new leader epochs for the partitions it led, in %d topic(s)",
                         me, written)
            return written
        await asyncio.sleep(RETRY_S * (attempt + 1))
    log.warning("broker %d: leader epochs after the restart lost %d compare-and-sets", me, ATTEMPTS)
    return written
