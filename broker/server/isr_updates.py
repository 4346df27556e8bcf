"""A leader's ISR change, written to the partition's metadata (Kafka's AlterPartition, done the
ZooKeeper-era way: a compare-and-set of the record that holds the partition's state).

The write is made only while the image still shows this broker leading the partition at the
same leader epoch: a leader that lost its leadership (the controller elected another) must not
touch the ISR any more. A proposal is a change (brokers added, brokers removed) to the ISR it was
made from, and every attempt applies that change to the ISR of the newest image (`recompute`): a
retry after a lost compare-and-set never writes back an ISR the controller has since changed
(re-adding a broker it removed), and a broker whose registration is not live, or that is shutting
down, is never added (as Kafka's controller refuses fenced or shutting-down brokers in
AlterPartition). The result is the
ISR the record holds afterwards (ours, or what another writer left), or None when the write was
dropped (leadership moved, the topic is gone, the store is unreachable).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Collection

from broker.metadata.store import Conflict, MetadataError, MetadataStore, PartitionState, eligible_brokers

log = logging.getLogger(__name__)

ATTEMPTS = 10
RETRY_S = 0.1


def recompute(state: PartitionState, base: frozenset[int], proposed: frozenset[int],
              live: Collection[int]) -> tuple[int, ...]:
    """The ISR to write now: the change from `base` (the ISR the proposal was made from) to
    `proposed`, applied to the ISR `state` holds now. Brokers added must be replicas with a live
    registration; the leader is never removed. In assignment order (the preferred leader first),
    as Kafka lists an ISR."""
    added = {r for r in proposed - base if r in live}
    removed = (base - proposed) - {state.leader}
    isr = (set(state.isr) | added) - removed
    return tuple(r for r in state.replicas if r in isr)


async def write_isr(store: MetadataStore, topic: str, topic_id: uuid.UUID, index: int, leader_id: int,
                    leader_epoch: int, isr: frozenset[int], base: frozenset[int] | None = None) -> frozenset[int] | None:
    """Write the change from `base` to `isr` (without `base`: `isr` as it is, brokers not live
    left out) to the partition's record, retried against each newer image."""
    for attempt in range(ATTEMPTS):
        image = store.image
        record = image.topics.get(topic)
        if record is None or record.topic_id != topic_id or record.assignment is None \
                or index >= len(record.assignment):
            return None
        state = record.assignment[index]
        if state.leader != leader_id or state.leader_epoch != leader_epoch:
            return None  # no longer ours to change
        new_isr = recompute(state, frozenset(state.isr) if base is None else base, isr,
                            eligible_brokers(image.brokers))
        if new_isr == tuple(state.isr) or frozenset(new_isr) == frozenset(state.isr):
            return frozenset(state.isr)
        assignment = list(record.assignment)
        assignment[index] = dataclasses.replace(state, isr=new_isr)
        try:
            written = await store.update_topic(dataclasses.replace(record, assignment=tuple(assignment)))
        except Conflict:
            await asyncio.sleep(RETRY_S * (attempt + 1))  # the newer record arrives by the watch
            continue
        except MetadataError as e:
            log.warning("%s-%d: cannot write ISR %s: %s", topic, index, sorted(new_isr), e)
            return None
        after = written.assignment[index] if written is not None and written.assignment else None
        return frozenset(after.isr) if after is not None else frozenset(new_isr)
    log.warning("%s-%d: ISR change to %s lost %d compare-and-sets; dropped", topic, index, sorted(isr), ATTEMPTS)
    return None
