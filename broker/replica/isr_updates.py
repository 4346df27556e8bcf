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
ISR the record holds afterwards (ours, or what another writer left); None when the change was
certainly not written (leadership moved, the topic is gone, the store refused it); or UNKNOWN when
it may or may not have been: the write timed out, the connection broke mid-write, the API server
answered 5xx (perhaps after committing), or every compare-and-set was lost (one of them may have
been ours, retried). An unknown outcome must be taken as possibly committed: the leader keeps its
maximal ISR and writes again until the record tells (Kafka's leader likewise keeps its pending
AlterPartition state until the controller answers, KIP-497).

Changes are batched per topic (`IsrBatcher`): the record holds every partition of a topic, so
changes of several partitions at once (a follower falling behind on all it follows) are one
write, not one per partition racing each other into Conflicts.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import uuid
import weakref
from collections.abc import Collection
from dataclasses import dataclass, field

from broker.metadata.store import (Conflict, MetadataError, MetadataStore, PartitionState, StoreUnavailable,
                                   eligible_brokers)

log = logging.getLogger(__name__)

ATTEMPTS = 10
RETRY_S = 0.1


class _Unknown:
    """The outcome of an ISR write that may or may not have been committed."""

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN = _Unknown()
Outcome = frozenset | None | _Unknown


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


@dataclass
class _Change:
    """One partition's ISR proposal waiting in its topic's batch, and the leader's future."""

    topic_id: uuid.UUID
    index: int
    leader_id: int
    leader_epoch: int
    isr: frozenset[int]
    base: frozenset[int] | None
    done: asyncio.Future = field(repr=False)

    def resolve(self, isr: "Outcome") -> None:
        if not self.done.done():
            self.done.set_result(isr)


class IsrBatcher:
    """ISR changes of one topic's partitions written together: one compare-and-set of the topic's
    record carries every change queued meanwhile (Kafka's AlterPartition likewise carries many
    partitions per request). One writer per topic: partitions of a topic never race each other
    into Conflicts; changes that arrive while a write is in flight go out in the next one."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._pending: dict[str, list[_Change]] = {}
        self._writers: dict[str, asyncio.Task] = {}
        self.writes = 0  # record writes made (tests compare them with the changes they carried)

    async def write(self, topic: str, topic_id: uuid.UUID, index: int, leader_id: int, leader_epoch: int,
                    isr: frozenset[int], base: frozenset[int] | None = None) -> Outcome:
        """Write the change from `base` to `isr` (without `base`: `isr` as it is, brokers not live
        left out); the ISR the record holds afterwards, None when the change was certainly not
        written, UNKNOWN when it may have been."""
        loop = asyncio.get_running_loop()
        change = _Change(topic_id, index, leader_id, leader_epoch, frozenset(isr), base, loop.create_future())
        self._pending.setdefault(topic, []).append(change)
        if topic not in self._writers:
            self._writers[topic] = loop.create_task(self._drain(topic), name=f"isr-write-{topic}")
        return await asyncio.shield(change.done)

    async def _drain(self, topic: str) -> None:
        batch: list[_Change] = []
        try:
            while self._pending.get(topic):
                batch = self._pending.pop(topic)
                await self._write_batch(topic, batch)
        finally:
            del self._writers[topic]
            for change in batch + self._pending.pop(topic, []):
                change.resolve(None)  # cancelled (the broker stops): nothing was written for them

    async def _write_batch(self, topic: str, batch: list[_Change]) -> None:
        for attempt in range(ATTEMPTS):
            image = self.store.image
            record = image.topics.get(topic)
            live = eligible_brokers(image.brokers)
            assignment = list(record.assignment or ()) if record is not None else []
            todo = []
            for change in batch:
                if record is None or record.topic_id != change.topic_id or change.index >= len(assignment):
                    change.resolve(None)
                    continue
                state = assignment[change.index]
                if state.leader != change.leader_id or state.leader_epoch != change.leader_epoch:
                    change.resolve(None)  # no longer ours to change
                    continue
                new_isr = recompute(state, frozenset(state.isr) if change.base is None else change.base,
                                    change.isr, live)
                if frozenset(new_isr) != frozenset(state.isr):
                    assignment[change.index] = dataclasses.replace(state, isr=new_isr)
                todo.append(change)
            if record is None or all(assignment[c.index] is record.assignment[c.index] for c in todo):
                for change in todo:  # nothing left to change: the record holds it already
                    change.resolve(frozenset(record.assignment[change.index].isr))
                return
            try:
                written = await self.store.update_topic(dataclasses.replace(record, assignment=tuple(assignment)))
            except Conflict:
                # The newer record arrives by the watch; every change is recomputed against it.
                await asyncio.sleep(RETRY_S * (attempt + 1) * random.uniform(0.5, 1.5))
                batch = todo
                continue
            except StoreUnavailable as e:
                # Timed out, cut mid-write or 5xx: the API server may have committed it.
                log.warning("%s: the ISR write of partitions %s has an unknown outcome: %s", topic,
                            [c.index for c in todo], e)
                for change in todo:
                    change.resolve(UNKNOWN)
                return
            except MetadataError as e:
                log.warning("%s: cannot write the ISR of partitions %s: %s", topic, [c.index for c in todo], e)
                for change in todo:
                    change.resolve(None)
                return
            self.writes += 1
            for change in todo:
                after = written.assignment[change.index] if written is not None and written.assignment else None
                change.resolve(frozenset(after.isr) if after is not None else frozenset(assignment[change.index].isr))
            return
        # Each lost compare-and-set was a definite "not written", but this call may be the retry of
        # a write whose outcome was unknown (then one of the newer versions may be ours): unknown.
        log.warning("%s: ISR changes of partitions %s lost %d compare-and-sets", topic,
                    [c.index for c in batch], ATTEMPTS)
        for change in batch:
            change.resolve(UNKNOWN)


async def write_isr(store: MetadataStore, topic: str, topic_id: uuid.UUID, index: int, leader_id: int,
                    leader_epoch: int, isr: frozenset[int], base: frozenset[int] | None = None) -> Outcome:
    """One partition's ISR change, batched with the changes to the same topic's other partitions
    made through this store meanwhile (see IsrBatcher.write)."""
    batcher = _batchers.get(store)
    if batcher is None:
        batcher = _batchers[store] = IsrBatcher(store)
    return await batcher.write(topic, topic_id, index, leader_id, leader_epoch, isr, base)


_batchers: "weakref.WeakKeyDictionary[MetadataStore, IsrBatcher]" = weakref.WeakKeyDictionary()
