"""The controller: one broker at a time, elected through the store's controller Lease.

Every broker runs a `Controller`; it campaigns for the Lease in a loop and acts only while it
holds it. Acting means: after every change of the metadata image (a topic created or grown, a
broker registered or its Lease expired), compare each topic with what `planner.plan_topic`
wants and write the difference with a compare-and-set. A lost CAS (someone else wrote first)
is simply planned again from the newer image; an unreachable store is retried with a back-off.
A controller whose Lease renewal failed stops writing at once (`store.is_controller` turns
false at the renew deadline, and every write is checked against it).

Leaders write ISR changes of their partitions themselves (followers falling out of or rejoining
the ISR, replica/isr_updates.py) with compare-and-sets of the same records; the controller removes
brokers whose Lease expired from the ISRs and elects leaders from the live ISR (planner.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
import uuid

from broker.controller import reassignment
from broker.controller.planner import PREFERRED, UNCLEAN_KEY, elect_on_request, imbalanced, plan_topic
from broker.metadata.store import (NO_TOPIC_ID, Conflict, MetadataImage, MetadataStore, StoreUnavailable, UnknownTopic,
                                   eligible_brokers)

log = logging.getLogger(__name__)

# Problems of a topic's own request (a KafkaTopic's spec Kafka refuses; see kube_objects) and the
# controller's: a replication factor the live brokers cannot hold (Kafka's INVALID_REPLICATION_FACTOR).
SPEC_PROBLEMS = frozenset({"InvalidConfig", "ReplicationFactorChange"})
PLANNING_PROBLEM = "InvalidReplicationFactor"

RETRY_S = 1.0
WRITES_IN_FLIGHT = 16


class Controller:
    def __init__(self, store: MetadataStore, node_id: int, campaign_interval_s: float | None = None,
                 rng: random.Random | None = None, grace_s: float | None = None,
                 unclean_default: bool = False, rebalance_interval_s: float | None = None) -> None:
        self.store = store
        self.unclean_default = unclean_default
        # auto.leader.rebalance.enable: preferred leaders back every interval (None: off).
        self.rebalance_interval_s = rebalance_interval_s
        self.node_id = node_id
        lease_s = float(getattr(store, "lease_duration_s", 0.0) or 0.0)
        # Renew well inside the renew deadline (2/3 of the Lease): a quarter of it, at most 2 s.
        self.campaign_interval_s = campaign_interval_s or (min(2.0, lease_s / 4) if lease_s else 2.0)
        # Brokers that lead partitions keep them, even if their Lease looks expired, until this
        # broker's view has been current for one Lease duration (`_grace_left`): after a start or
        # an API-server outage Leases are judged afresh, and one that lapsed while nobody could
        # renew or see it must not move leaderships. A view current for that long already saw
        # every renewal: a new controller then acts on the liveness it observed at once, so a
        # controller's death costs about one Lease, not two (issue 35).
        self.grace_s = grace_s if grace_s is not None else lease_s
        self.rng = rng or random.Random()
        self.active = False
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task] = []
        self._problems: dict[str, str] = {}
        self._store_down = False
        self.writes = 0  # assignments written while controller (for tests and metrics)
        # What the next reconcile looks at: every topic, or only those changed since the last one
        # (a create or an assignment; thousands of topics are not re-planned for each new one).
        self._plan_all = True
        self._dirty: set[str] = set()
        self.planned = 0  # topics planned (tests check that a create does not re-plan them all)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        self.store.subscribe(self._on_image)
        self._tasks = [asyncio.create_task(self._campaign_loop(), name="controller-campaign"),
                       asyncio.create_task(self._reconcile_loop(), name="controller-reconcile")]
        if self.rebalance_interval_s:
            self._tasks.append(asyncio.create_task(self._rebalance_loop(), name="controller-rebalance"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.active = False

    async def resign(self) -> None:
        """A stopping broker: no more campaigns or writes, and the Lease handed back now if held,
        so a broker that stays takes over (and moves this one's leaderships) without waiting
        for it to expire."""
        was_active = self.active
        await self.stop()
        await self.store.resign(self.node_id)
        if was_active:
            log.info("broker %d resigned as controller (shutting down)", self.node_id)

    def _on_image(self, old: MetadataImage, new: MetadataImage) -> None:
        changed = new.changed_since(old) if old is not None else None
        if changed is None:
            self._plan_all = True
        elif not self._plan_all:
            self._dirty |= changed
        self._wake.set()

    def _wake_all(self) -> None:
        """Plan every topic at the next turn (a new controller, a retry, the end of the grace)."""
        self._plan_all = True
        self._wake.set()

    async def _campaign_loop(self) -> None:
        while True:
            try:
                won = await self.store.campaign(self.node_id)
                self._store_down = False
            except StoreUnavailable as e:
                if not self._store_down:  # once per outage, not every interval
                    log.warning("controller election: metadata store unavailable: %s", e)
                self._store_down = True
                won = False
            except Exception:
                log.exception("controller election failed")
                won = False
            won = won and self.store.is_controller(self.node_id)
            if won and not self.active:
                log.info("broker %d is now the controller", self.node_id)
                self.active = True
                self._wake_all()
                grace = self._grace_left()
                if grace > 0:
                    log.info("controller: leaderships of brokers whose Leases look expired are kept for "
                             "%.1fs more (this broker's view has not yet been current for a Lease duration)", grace)
                    asyncio.get_running_loop().call_later(grace, self._wake_all)
            elif not won and self.active:
                log.info("broker %d is no longer the controller", self.node_id)
                self.active = False
            await asyncio.sleep(self.campaign_interval_s)

    def _grace_left(self) -> float:
        """Seconds before Leases judged expired may move leaderships: until the store's view has
        been current, without a gap, for grace_s (a stale view: the whole grace)."""
        since = self.store.current_since()
        if since is None:
            return self.grace_s
        return max(0.0, since + self.grace_s - time.monotonic())

    # -- the work ----------------------------------------------------------------------------
    async def _reconcile_loop(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            if not self.active:
                continue
            try:
                again = await self.reconcile()
            except Exception:
                log.exception("controller: reconciling failed")
                again = True
            if again:
                await asyncio.sleep(RETRY_S)
                self._wake_all()

    async def reconcile(self) -> bool:
        """Bring every topic to its plan once; True if something must be tried again."""
        image = self.store.image
        live = {node: reg.rack for node, reg in image.brokers.items()}
        stopping = frozenset(image.brokers) - eligible_brokers(image.brokers)  # controlled shutdowns
        holding: frozenset[int] = frozenset()
        in_grace = self._grace_left() > 0
        if in_grace:
            holding = frozenset(s.leader for t in image.topics.values() for s in t.assignment or () if s.leader >= 0)
        if self._plan_all or in_grace:
            topics = list(image.topics.values())
        else:
            topics = [image.topics[n] for n in self._dirty if n in image.topics]
        self._plan_all, self._dirty = False, set()
        self.planned += len(topics)
        writes = []
        for topic in topics:
            if topic.topic_id == NO_TOPIC_ID and topic.problem is not None and topic.problem[0] in SPEC_PROBLEMS:
                continue  # a KafkaTopic whose spec Kafka would refuse: not created (its status says why)
            plan = plan_topic(topic, live, self.rng, holding, self.unclean_default, stopping)
            if plan.problem and self._problems.get(topic.name) != plan.problem:
                log.warning("%s", plan.problem)
            if plan.problem:
                # Waits for the image to change (e.g. another broker registers); no retry loop.
                self._problems[topic.name] = plan.problem
            else:
                self._problems.pop(topic.name, None)
            changes: dict = {}
            if plan.assignment is not None:
                changes["assignment"] = plan.assignment
            # The planning problem goes on the record (Ready=False in a KafkaTopic's status), unless
            # the spec's own problem is what the status shows.
            if topic.problem is None or topic.problem[0] not in SPEC_PROBLEMS:
                wanted = (PLANNING_PROBLEM, plan.problem) if plan.problem else None
                if wanted != topic.problem:
                    changes["problem"] = wanted
            if not changes:
                continue
            if topic.topic_id == NO_TOPIC_ID and "assignment" in changes:  # made with kubectl: the controller gives it its id
                changes["topic_id"] = uuid.uuid4()
            writes.append(dataclasses.replace(topic, **changes))
        if not writes:
            return False
        # Independent CAS writes, several in flight: a burst of new topics is one round trip deep.
        limit = asyncio.Semaphore(WRITES_IN_FLIGHT)
        outcomes = await asyncio.gather(*(self._write(rec, limit) for rec in writes))
        return any(outcomes)

    async def _write(self, rec, limit: asyncio.Semaphore) -> bool:
        """One CAS write of a topic's assignment; True if it must be planned again."""
        async with limit:
            if not self.store.is_controller(self.node_id):
                self.active = False
                return False
            try:
                await self.store.update_topic(rec)
                self.writes += 1
                return False
            except (Conflict, UnknownTopic):
                return True  # a newer image is on its way; plan again from it
            except StoreUnavailable as e:
                if not self._store_down:
                    log.warning("controller: metadata store unavailable: %s", e)
                return True

    # -- elections asked for (ElectLeaders) and preferred-leader rebalance ------------------------
    async def elect_leaders(self, wanted: dict[str, list[int]], election_type: int) -> dict[tuple[str, int], str]:
        """Elect leaders of the named partitions (ElectLeaders): one CAS write per topic, planned
        again from the newer image on a Conflict. Returns (topic, partition) -> Kafka error name."""
        results: dict[tuple[str, int], str] = {}
        for name, indexes in wanted.items():
            for attempt in range(10):
                if not self.store.is_controller(self.node_id):
                    results.update({(name, i): "not_controller" for i in indexes})
                    break
                image = self.store.image
                topic = image.topics.get(name)
                if topic is None or topic.assignment is None:
                    results.update({(name, i): "unknown_topic_or_partition" for i in indexes})
                    break
                electable = set(eligible_brokers(image.brokers))
                assignment = list(topic.assignment)
                changed = False
                for i in indexes:
                    if not 0 <= i < len(assignment):
                        results[(name, i)] = "unknown_topic_or_partition"
                        continue
                    new, why = elect_on_request(assignment[i], electable, election_type)
                    results[(name, i)] = why
                    if new is not None:
                        assignment[i] = new
                        changed = True
                if not changed:
                    break
                try:
                    await self.store.update_topic(dataclasses.replace(topic, assignment=tuple(assignment)))
                    self.writes += 1
                    break
                except Conflict:
                    await asyncio.sleep(0.1 * (attempt + 1))
                except (StoreUnavailable, UnknownTopic) as e:
                    log.warning("controller: leader election for %s failed: %s", name, e)
                    results.update({(name, i): "not_controller" if isinstance(e, StoreUnavailable)
                                    else "unknown_topic_or_partition" for i in indexes})
                    break
        return results

    # -- partition reassignments (KIP-455; the decisions are controller/reassignment.py's) ---------
    async def alter_reassignments(self, wanted: dict[str, dict[int, list[int] | None]],
                                  allow_replication_factor_change: bool = True) -> dict[tuple[str, int], tuple[str, str | None]]:
        """Start (a replica list) or cancel (None) reassignments: one CAS write per topic, planned
        again from the newer image on a Conflict. (topic, partition) -> (Kafka error name, message)."""
        results: dict[tuple[str, int], tuple[str, str | None]] = {}
        for name, partitions in wanted.items():
            for attempt in range(10):
                if not self.store.is_controller(self.node_id):
                    results.update({(name, i): ("not_controller", None) for i in partitions})
                    break
                image = self.store.image
                topic = image.topics.get(name)
                if topic is None or topic.assignment is None:
                    results.update({(name, i): ("unknown_topic_or_partition", "Unknown topic or partition.")
                                    for i in partitions})
                    break
                electable = eligible_brokers(image.brokers)
                unclean = topic.configs.get(UNCLEAN_KEY, "true" if self.unclean_default else "false").strip().lower() == "true"
                assignment = list(topic.assignment)
                for i, replicas in partitions.items():
                    if not 0 <= i < len(assignment):
                        results[(name, i)] = ("unknown_topic_or_partition", "Unknown topic or partition.")
                        continue
                    try:
                        if replicas is None:
                            assignment[i] = reassignment.cancel(assignment[i], unclean, electable)
                        else:
                            target = reassignment.validate_target(replicas, image.brokers)
                            assignment[i] = reassignment.start(assignment[i], target,
                                                               allow_replication_factor_change, electable)
                        results[(name, i)] = ("none", None)
                    except reassignment.ReassignmentError as e:
                        results[(name, i)] = (e.code, str(e))
                if tuple(assignment) == tuple(topic.assignment):
                    break
                try:
                    await self.store.update_topic(dataclasses.replace(topic, assignment=tuple(assignment)))
                    self.writes += 1
                    moved = sum(1 for i in partitions if results.get((name, i), ("",))[0] == "none")
                    log.info("controller: reassignment of %d partition(s) of %s written", moved, name)
                    break
                except Conflict:
                    await asyncio.sleep(0.1 * (attempt + 1))
                except (StoreUnavailable, UnknownTopic) as e:
                    log.warning("controller: reassignment of %s failed: %s", name, e)
                    code = "not_controller" if isinstance(e, StoreUnavailable) else "unknown_topic_or_partition"
                    results.update({(name, i): (code, str(e)) for i in partitions})
                    break
            else:
                results.update({(name, i): ("request_timed_out", "lost every compare-and-set") for i in partitions})
        return results

    async def _rebalance_loop(self) -> None:
        """auto.leader.rebalance.enable: every leader.imbalance.check.interval.seconds, move
        leadership back to preferred replicas that can lead again (no per-broker threshold: Kafka's
        KRaft controller has none)."""
        while True:
            await asyncio.sleep(self.rebalance_interval_s)
            if not self.active:
                continue
            try:
                image = self.store.image
                wanted = imbalanced(image.topics.values(), set(eligible_brokers(image.brokers)))
                if wanted:
                    done = await self.elect_leaders(wanted, PREFERRED)
                    moved = sum(1 for why in done.values() if why == "none")
                    if moved:
                        log.info("controller: %d partition(s) moved back to their preferred leader", moved)
            except Exception:
                log.exception("controller: preferred leader rebalance failed")
