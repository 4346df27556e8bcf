"""Topic lifecycle shared by CreateTopics, DeleteTopics, CreatePartitions, Metadata's
auto-creation and the internal topics of coordinators: validate, write to the cluster metadata
store, and wait for the controller to complete it. Logs open and close by themselves when the
image says this broker leads a partition (ReplicaManager.apply_image)."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from typing import Callable

from kio.schema.errors import ErrorCode

from broker import topic_config
from broker.config import BrokerConfig
from broker.controller import manual_assignment
from broker.metadata.store import (Conflict, MetadataImage, MetadataStore, StoreUnavailable, TopicExists,
                                   TopicRecord, TopicTooLarge, UnknownTopic, eligible_brokers, new_topic)
from broker.admin import file_descriptors
from broker.replica.replica_manager import ReplicaManager

LEGAL_NAME = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249

class TopicError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_topic_name(name: str) -> None:
    if not name or name in (".", ".."):
        raise TopicError(ErrorCode.invalid_topic_exception, f"topic name {name!r} is illegal")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(ErrorCode.invalid_topic_exception, f"topic name is longer than {MAX_NAME_LENGTH} characters")
    if not LEGAL_NAME.match(name):
        raise TopicError(ErrorCode.invalid_topic_exception,
                         f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'")


def validate_topic_configs(configs: dict[str, str]) -> None:
    """INVALID_CONFIG naming the key, for an unknown or unsupported key or a bad value."""
    try:
        topic_config.validate(configs)
    except topic_config.TopicConfigError as e:
        raise TopicError(ErrorCode.invalid_config, str(e)) from None


def is_assigned(record: TopicRecord | None) -> bool:
    """The controller has placed every partition the topic's spec asks for."""
    return record is not None and record.assignment is not None and len(record.assignment) >= record.partitions


class TopicManager:
    """Topic changes from any broker: validate, write to the store (create-if-absent or CAS),
    then wait until the controller's assignment is visible in this broker's image, bounded by
    the request's timeout. The store being unreachable is a retriable error (NOT_CONTROLLER)."""

    def __init__(self, config: BrokerConfig, store: MetadataStore, replicas: ReplicaManager) -> None:
        self.config = config
        self.store = store
        self.replicas = replicas
        self._waiters: list[tuple[Callable[[MetadataImage], bool], asyncio.Future]] = []
        store.subscribe(self._on_image)

    # -- waiting for the image ---------------------------------------------------------------
    def _on_image(self, old: MetadataImage, new: MetadataImage) -> None:
        keep = []
        for predicate, fut in self._waiters:
            if fut.done():
                continue
            try:
                ok = predicate(new)
            except Exception as e:  # a broken predicate must not break the store's callbacks
                fut.set_exception(e)
                continue
            if ok:
                fut.set_result(None)
            else:
                keep.append((predicate, fut))
        self._waiters = keep

    async def wait_for_image(self, predicate: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until `predicate(image)` holds; False if `timeout_s` passed first."""
        if predicate(self.store.image):
            return True
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append((predicate, fut))
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout_s)
            return True
        except asyncio.TimeoutError:
            return predicate(self.store.image)
        finally:
            if not fut.done():
                fut.cancel()

    def live_brokers(self) -> int:
        return len(self.store.image.brokers)

    # -- create ------------------------------------------------------------------------------
    def check_create(self, name: str, partitions: int, replication_factor: int, configs: dict[str, str]) -> tuple[int, int]:
        """Validate a creation request; returns the effective (partitions, replication factor)."""
        validate_topic_name(name)
        if name in self.store.image.topics:
            raise TopicError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        if partitions == -1:
            partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if partitions <= 0:
            raise TopicError(ErrorCode.invalid_partitions, f"number of partitions must be positive, got {partitions}")
        if replication_factor <= 0:
            raise TopicError(ErrorCode.invalid_replication_factor, f"replication factor must be positive, got {replication_factor}")
        live = self.live_brokers()
        if replication_factor > max(live, 1):
            raise TopicError(ErrorCode.invalid_replication_factor,
                             f"replication factor {replication_factor} is larger than the {live} available broker"
                             + ("" if live == 1 else "s"))
        validate_topic_configs(configs)
        self.check_size(name, partitions, replication_factor)
        self.check_partition_budget(partitions)
        return partitions, replication_factor

    def check_create_manual(self, name: str, entries, num_partitions: int, replication_factor: int,
                            configs: dict[str, str]) -> tuple[tuple[int, ...], ...]:
        """Validate a creation with manual replica assignments ((index, broker ids) entries) as
        Kafka does; the replicas of each partition, in index order."""
        validate_topic_name(name)
        if name in self.store.image.topics:
            raise TopicError(ErrorCode.topic_already_exists, f"topic {name!r} already exists")
        brokers = self.store.image.brokers
        try:
            placed = manual_assignment.for_new_topic(entries, num_partitions, replication_factor,
                                                     brokers, eligible_brokers(brokers))
        except manual_assignment.ManualAssignmentError as e:
            raise TopicError(ErrorCode[e.code], str(e)) from None
        validate_topic_configs(configs)
        self.check_size(name, len(placed), len(placed[0]))
        self.check_partition_budget(len(placed))
        return placed

    def check_partition_budget(self, adding: int) -> None:
        """Refuse, before anything is recorded, partitions beyond flotilla.max.partitions or more
        than this broker has file descriptors left to open (INVALID_PARTITIONS, naming why)."""
        limit = self.config["flotilla.max.partitions"]
        total = self.store.image.partition_count()
        if total + adding > limit:
            raise TopicError(ErrorCode.invalid_partitions,
                             f"{adding} more partitions would make {total + adding} in the cluster, "
                             f"above flotilla.max.partitions={limit}")
        need = -(-adding // max(self.live_brokers(), 1)) * file_descriptors.PER_PARTITION
        free = file_descriptors.free()
        if need > free:
            raise TopicError(ErrorCode.invalid_partitions,
                             f"{adding} more partitions need about {need} file descriptors on this broker, "
                             f"but only {max(free, 0)} are free under its open-file limit "
                             f"({file_descriptors.limit()}, RLIMIT_NOFILE): raise the limit or use fewer partitions")

    def check_size(self, name: str, partitions: int, replication_factor: int) -> None:
        """The metadata store's bound on one topic (Kubernetes: etcd's object size limit)."""
        limit = self.store.max_partitions(replication_factor)
        if limit is not None and partitions > limit:
            raise TopicError(ErrorCode.invalid_partitions,
                             f"topic {name!r}: {partitions} partitions exceed the {limit} one topic can have at "
                             f"replication factor {replication_factor} in this cluster's metadata store")

    async def create(self, name: str, partitions: int = -1, replication_factor: int = -1,
                     configs: dict[str, str] | None = None, timeout_s: float | None = None,
                     requested_replicas: tuple[tuple[int, ...], ...] | None = None) -> TopicRecord:
        """Create the topic; with `timeout_s`, also wait for its assignment (REQUEST_TIMED_OUT if it
        does not come in time: the topic exists and the controller completes it later, as in Kafka).
        `requested_replicas` (checked by check_create_manual) places its partitions by hand."""
        configs = dict(configs or {})
        if requested_replicas is None:
            partitions, replication_factor = self.check_create(name, partitions, replication_factor, configs)
        else:
            partitions, replication_factor = len(requested_replicas), len(requested_replicas[0])
        try:
            record = await self.store.create_topic(dataclasses.replace(
                new_topic(name, partitions, replication_factor, configs), requested_replicas=requested_replicas))
        except TopicExists:
            raise TopicError(ErrorCode.topic_already_exists, f"topic {name!r} already exists") from None
        except TopicTooLarge as e:
            raise too_large(name, partitions, e) from None
        except StoreUnavailable as e:
            raise store_unavailable(e) from None
        if timeout_s is not None:
            record = await self.await_created(name, timeout_s, record)
        return record

    async def await_created(self, name: str, timeout_s: float, record: TopicRecord) -> TopicRecord:
        """Wait for a created topic's assignment (and undo it if this broker cannot open its part)."""
        await self._await_assignment(name, timeout_s)
        record = self.store.image.topics.get(name, record)
        await self._roll_back_if_unopened(name)
        return record

    async def _roll_back_if_unopened(self, name: str) -> None:
        """If this broker could not open partitions of the new topic it leads (out of file
        descriptors, a failed disk), remove the topic again instead of leaving it half there."""
        await self.replicas.wait_opened()
        failures = [why for (topic, _), why in self.replicas.open_failures.items() if topic == name]
        if not failures:
            return
        try:
            await self.store.delete_topic(name)
            outcome = "the topic was removed again"
        except Exception as e:  # the store is down: the controller's image keeps it; say so
            outcome = f"removing it again failed too ({e})"
        raise TopicError(ErrorCode.kafka_storage_error,
                         f"topic {name!r}: this broker could not open {len(failures)} of its partitions "
                         f"({failures[0]}); {outcome}")

    async def _await_assignment(self, name: str, timeout_s: float) -> None:
        if not await self.wait_for_image(lambda img: is_assigned(img.topics.get(name)), timeout_s):
            raise TopicError(ErrorCode.request_timed_out,
                             f"topic {name!r} was created, but the controller has not assigned its partitions"
                             f" within {timeout_s:.1f}s")

    async def ensure(self, name: str, partitions: int, configs: dict[str, str] | None = None,
                     replication_factor: int = 1) -> TopicRecord:
        """Create an internal topic if it does not exist yet (coordinators' own topics). Fewer live
        brokers than its replication factor: TopicError (Kafka refuses to create it then too)."""
        existing = self.store.image.topics.get(name)
        if existing is not None:
            return existing
        live = self.live_brokers()
        if replication_factor > live:
            raise TopicError(ErrorCode.invalid_replication_factor,
                             f"{name} needs {replication_factor} live brokers (its replication factor), "
                             f"{live} are alive")
        try:
            return await self.store.create_topic(new_topic(name, partitions, replication_factor, configs))
        except TopicExists:
            return self.store.image.topics[name] if name in self.store.image.topics else existing

    # -- delete ------------------------------------------------------------------------------
    async def delete(self, name: str, timeout_s: float | None = None) -> TopicRecord:
        if not self.config["delete.topic.enable"]:
            raise TopicError(ErrorCode.topic_deletion_disabled, "delete.topic.enable is false")
        record = self.store.image.topics.get(name)
        if record is None:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
        try:
            await self.store.delete_topic(name)
        except UnknownTopic:
            raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist") from None
        except StoreUnavailable as e:
            raise store_unavailable(e) from None
        if timeout_s is not None:
            await self.wait_for_image(lambda img: img.topics.get(name) is None
                                      or img.topics[name].topic_id != record.topic_id, timeout_s)
        return record

    # -- grow --------------------------------------------------------------------------------
    async def add_partitions(self, name: str, total: int, validate_only: bool = False,
                             timeout_s: float | None = None, assignments=None) -> TopicRecord:
        """Grow the topic to `total` partitions; `assignments` (CreatePartitions' broker id lists, one
        per new partition) places them by hand: written with the new count in one compare-and-set."""
        for _ in range(5):  # a lost CAS (the controller wrote in between) is tried again
            record = self.store.image.topics.get(name)
            if record is None:
                raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
            if total < record.partitions:
                raise TopicError(ErrorCode.invalid_partitions,
                                 f"topic {name!r} has {record.partitions} partitions; cannot reduce to {total}")
            if total == record.partitions:
                raise TopicError(ErrorCode.invalid_partitions, f"topic {name!r} already has {total} partitions")
            change = {"partitions": total}
            if assignments is not None:
                change["assignment"] = self._placed_by_hand(record, total, assignments)
            self.check_size(name, total, record.replication_factor)
            self.check_partition_budget(total - record.partitions)
            if validate_only:
                return record
            try:
                updated = await self.store.update_topic(dataclasses.replace(record, **change))
            except Conflict:
                await self.wait_for_image(lambda img: img.topics.get(name) is not record, 1.0)
                continue
            except TopicTooLarge as e:
                raise too_large(name, total, e) from None
            except UnknownTopic:
                raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist") from None
            except StoreUnavailable as e:
                raise store_unavailable(e) from None
            if timeout_s is not None:
                await self._await_assignment(name, timeout_s)
                await self._shrink_if_unopened(name, record.partitions)
            return self.store.image.topics.get(name, updated)
        raise TopicError(ErrorCode.not_controller, f"topic {name!r} kept changing; try again")

    def _placed_by_hand(self, record: TopicRecord, total: int, lists) -> tuple:
        """The topic's assignment with the new partitions where CreatePartitions put them (Kafka's
        checks: one list per new partition, each of the topic's replication factor)."""
        current = tuple(record.assignment or ())
        if len(current) < record.partitions:  # the controller has not placed all it has yet
            raise TopicError(ErrorCode.not_controller, f"topic {record.name!r} is still being assigned; try again")
        factor = len(current[0].replicas) if current else record.replication_factor
        brokers = self.store.image.brokers
        active = eligible_brokers(brokers)
        try:
            placed = manual_assignment.for_new_partitions(lists, record.partitions, total - record.partitions,
                                                          factor, brokers, active)
        except manual_assignment.ManualAssignmentError as e:
            raise TopicError(ErrorCode[e.code], str(e)) from None
        return current + tuple(manual_assignment.first_state(r, active) for r in placed)

    async def _shrink_if_unopened(self, name: str, before: int) -> None:
        """If this broker could not open new partitions of a grown topic it leads, undo the grow
        (back to `before` partitions and their assignment) instead of leaving partitions no one serves."""
        await self.replicas.wait_opened()
        failures = [why for (topic, index), why in self.replicas.open_failures.items() if topic == name and index >= before]
        if not failures:
            return
        outcome = "the topic keeps partitions this broker cannot serve"
        for _ in range(5):  # the controller may write in between (a CAS lost): read and try again
            current = self.store.image.topics.get(name)
            if current is None or current.partitions <= before:
                outcome = "the topic changed meanwhile; nothing was undone"
                break
            try:
                await self.store.update_topic(dataclasses.replace(
                    current, partitions=before,
                    assignment=None if current.assignment is None else tuple(current.assignment[:before])))
                outcome = f"the topic was given back its {before} partitions"
                break
            except Conflict:
                await self.wait_for_image(lambda img: img.topics.get(name) is not current, 1.0)
            except Exception as e:  # the store is down: say so
                outcome = f"undoing the grow failed too ({e})"
                break
        raise TopicError(ErrorCode.kafka_storage_error,
                         f"topic {name!r}: this broker could not open {len(failures)} of its new partitions "
                         f"({failures[0]}); {outcome}")


    # -- configs ------------------------------------------------------------------------------
    async def alter_configs(self, name: str, change: Callable[[dict[str, str]], dict[str, str]],
                            validate_only: bool = False) -> TopicRecord:
        """Sets a topic's own configs to `change(current)`, validated as CreateTopics validates
        them (INVALID_CONFIG naming the key); a CAS of the topic's record, tried again when
        another write came first. Brokers apply the new settings when the image shows them."""
        for _ in range(5):
            record = self.store.image.topics.get(name)
            if record is None:
                raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist")
            try:
                configs = topic_config.validate(change(dict(record.configs)))
            except topic_config.TopicConfigError as e:
                raise TopicError(ErrorCode.invalid_config, str(e)) from None
            if validate_only or configs == dict(record.configs):
                return record
            try:
                return await self.store.update_topic(dataclasses.replace(record, configs=configs))
            except Conflict:
                await self.wait_for_image(lambda img: img.topics.get(name) is not record, 1.0)
            except UnknownTopic:
                raise TopicError(ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist") from None
            except StoreUnavailable as e:
                raise store_unavailable(e) from None
        raise TopicError(ErrorCode.not_controller, f"topic {name!r} kept changing; try again")


def too_large(name: str, partitions: int, e: Exception) -> TopicError:
    return TopicError(ErrorCode.invalid_partitions,
                      f"topic {name!r} cannot have {partitions} partitions in this cluster's metadata store: {e}")


def store_unavailable(e: Exception) -> TopicError:
    return TopicError(ErrorCode.not_controller, f"cluster metadata is unavailable, try again: {e}")
