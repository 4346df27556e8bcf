"""A leader's ISR change, written to the partition's metadata (Kafka's AlterPartition, done the
ZooKeeper-era way: a compare-and-set of the record that holds the partition's state).

The write is made only while the image still shows this broker leading the partition at the
same leader epoch: a leader that lost its leadership (the controller elected another) must not
touch the ISR any more. A lost compare-and-set is retried against the newer image; the result is
the ISR the record holds afterwards (ours, or what another writer left), or None when the write
was dropped (leadership moved, the topic is gone, the store is unreachable).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid

from broker.metadata.store import Conflict, MetadataError, MetadataStore

log = logging.getLogger(__name__)

ATTEMPTS = 10
RETRY_S = 0.1


async def write_isr(store: MetadataStore, topic: str, topic_id: uuid.UUID, index: int, leader_id: int,
                    leader_epoch: int, isr: frozenset[int]) -> frozenset[int] | None:
    for attempt in range(ATTEMPTS):
        record = store.image.topics.get(topic)
        if record is None or record.topic_id != topic_id or record.assignment is None \
                or index >= len(record.assignment):
            return None
        state = record.assignment[index]
        if state.leader != leader_id or state.leader_epoch != leader_epoch:
            return None  # no longer ours to change
        if frozenset(state.isr) == isr:
            return isr
        # The ISR in assignment order (the preferred leader first), as Kafka lists it.
        new_isr = tuple(r for r in state.replicas if r in isr)
        assignment = list(record.assignment)
        assignment[index] = dataclasses.replace(state, isr=new_isr)
        try:
            written = await store.update_topic(dataclasses.replace(record, assignment=tuple(assignment)))
        except Conflict:
            await asyncio.sleep(RETRY_S * (attempt + 1))  # the newer record arrives by the watch
            continue
        except MetadataError as e:
            log.warning("%s-%d: cannot write ISR %s: %s", topic, index, sorted(isr), e)
            return None
        after = written.assignment[index] if written is not None and written.assignment else None
        return frozenset(after.isr) if after is not None else isr
    log.warning("%s-%d: ISR change to %s lost %d compare-and-sets; dropped", topic, index, sorted(isr), ATTEMPTS)
    return None
