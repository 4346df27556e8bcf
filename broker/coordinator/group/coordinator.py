"""The group coordinator for the classic consumer group protocol (JoinGroup/SyncGroup).

API logic as Kafka's GroupCoordinator has it: members join, the coordinator waits for every
known member to rejoin (bounded by the rebalance timeout, with `group.initial.rebalance.delay.ms`
for a group that starts empty), picks a protocol every member supports, answers all JoinGroups
(the leader gets the member list), relays the leader's assignments in SyncGroup, and watches
sessions with one timer per member. Static members (KIP-345) keep their place across restarts
of the client. Groups and offsets are persisted in `__consumer_offsets` (see offsets_log; every
write acks=all, group_writes.py). Committed offsets are offsets.py's (Kafka's GroupMetadataManager),
apart from membership here.

Everything runs on the event loop thread: state changes happen between awaits, so no locks.
JoinGroup and SyncGroup return futures the handlers await; timers are `loop.call_later`.
Coordinator shards, as in Kafka: a group belongs to one partition of `__consumer_offsets`, and
the broker leading that partition coordinates it. A shard is loaded (its partition replayed)
when this broker becomes its leader and unloaded when it stops; requests for groups of shards
not loaded here answer NOT_COORDINATOR so clients ask FindCoordinator again.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.group import codec
from broker.coordinator.group.group_metadata import (
    GroupMetadata,
    GroupState,
    MemberMetadata,
    OffsetAndMetadata,
)
from broker.coordinator.group.group_writes import GroupWrites
from broker.coordinator.group.offsets import GroupOffsets, now_ms
from broker.coordinator.group.offsets_log import TOPIC, LoadedMarker, OffsetsLog
from broker.coordinator.group.results import (GroupOverview, GroupSummary, JoinResult, LeaveMember,  # noqa: F401
                                              MemberSummary, SyncResult)

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.metadata.store import MetadataStore
    from broker.replica.partition_writer import PartitionWriter
    from broker.admin.topics import TopicManager

log = logging.getLogger(__name__)

# A member that has not received its first JoinGroup answer cannot heartbeat; it is dropped if
# the rebalance takes longer than this (Kafka's NewMemberJoinTimeoutMs).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000
# A shard being loaded gives the event loop a turn after this many records.
LOAD_YIELD_RECORDS = 2000


def _resolve(waiter: Any, result: Any) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(result)


def _cancel(timer: Any) -> None:
    if timer is not None:
        timer.cancel()


class GroupCoordinator(GroupOffsets, GroupWrites):
    def __init__(self, *, config: "BrokerConfig", node_id: int, store: "MetadataStore", topics: "TopicManager",
                 writer: "PartitionWriter") -> None:
        self.metadata, self.topics, self.writer = store, topics, writer
        self.initial_rebalance_delay_ms: int = config["group.initial.rebalance.delay.ms"]
        self.min_session_timeout_ms: int = config["group.min.session.timeout.ms"]
        self.max_session_timeout_ms: int = config["group.max.session.timeout.ms"]
        self.offsets_retention_ms: int = config["offsets.retention.minutes"] * 60 * 1000
        self.offsets_retention_check_ms: int = config["offsets.retention.check.interval.ms"]
        self.commit_timeout_ms: int = config["offsets.commit.timeout.ms"]
        self.groups: dict[str, GroupMetadata] = {}
        self.store = OffsetsLog(config=config, node_id=node_id, store=store, topics=topics, writer=writer)
        # __consumer_offsets partitions this broker leads and has loaded: its coordinator shards.
        self.shards: set[int] = set()
        # Shards being loaded (replayed) in the background: their groups answer
        # COORDINATOR_LOAD_IN_PROGRESS meanwhile, as Kafka's do, and the event loop keeps serving.
        self._loading: dict[int, asyncio.Task] = {}
        self.active = False
        self._expiry_task: asyncio.Task | None = None
        # Writes nobody waits on (an empty group's metadata), finished or cancelled at stop.
        self._writes: set[asyncio.Task] = set()
        writer.on_leadership_change(self._on_leadership)

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Serve the shards this broker leads (loaded as leadership arrives, see _on_leadership)."""
        self.active = True
        self._expiry_task = asyncio.create_task(self._expiry_loop(), name="group-offset-expiry")

    async def ensure_topic(self, timeout_s: float = 30.0) -> None:
        """Create `__consumer_offsets` if needed and wait until its partitions have leaders and
        the shards led here are loaded (FindCoordinator does the first part lazily, as Kafka
        does; tests call this)."""
        await self.store.ensure_topic()
        await self.topics.wait_for_image(lambda img: self.store.all_led(img), timeout_s)
        await asyncio.sleep(0)  # let leadership callbacks start their shard loads
        await asyncio.wait_for(asyncio.gather(*self._loading.values(), return_exceptions=True), timeout_s)

    async def stop(self) -> None:
        self.active = False
        loading = list(self._loading.values())
        self._loading.clear()
        for task in loading:
            task.cancel()
        await asyncio.gather(*loading, return_exceptions=True)
        if self._expiry_task is not None:
            self._expiry_task.cancel()
            await asyncio.gather(self._expiry_task, return_exceptions=True)
        writes = list(self._writes)
        for task in writes:
            task.cancel()
        await asyncio.gather(*writes, return_exceptions=True)
        for group in list(self.groups.values()):
            self._unload_group(group)
        self.shards.clear()

    def _unload_group(self, group: GroupMetadata) -> None:
        _cancel(group.join_timer)
        _cancel(group.sync_timer)
        for timer in group.pending_members.values():
            _cancel(timer)
        for m in group.members.values():
            _cancel(m.heartbeat_timer)
            # Clients find the coordinator again and rejoin (Kafka answers NOT_COORDINATOR
            # when a coordinator moves away).
            _resolve(m.join_waiter, JoinResult(ErrorCode.not_coordinator, m.member_id))
            _resolve(m.sync_waiter, SyncResult(ErrorCode.not_coordinator))
        self.groups.pop(group.group_id, None)

    # -- shards: one per __consumer_offsets partition led here -------------------------------
    def _on_leadership(self, topic: str, index: int, leading: bool) -> None:
        if topic != TOPIC:
            return
        self.store.refresh_partition_count()
        if leading:
            if index in self.shards or index in self._loading:
                return
            self._loading[index] = asyncio.get_running_loop().create_task(self._load_shard(index),
                                                                          name=f"load-{TOPIC}-{index}")
        else:
            task = self._loading.pop(index, None)
            if task is not None:
                task.cancel()  # leadership moved on before the shard was loaded: drop it
            self.shards.discard(index)
            for group in [g for g in self.groups.values() if self.store.partition_for(g.group_id) == index]:
                self._unload_group(group)
            log.info("coordinator shard %s-%d unloaded", TOPIC, index)

    def not_here(self, group_id: str) -> ErrorCode | None:
        """NOT_COORDINATOR unless this broker leads the group's __consumer_offsets partition."""
        if not self.active:
            return ErrorCode.coordinator_not_available
        shard = self.store.partition_for(group_id)
        if shard in self._loading:
            return ErrorCode.coordinator_load_in_progress
        if shard not in self.shards:
            return ErrorCode.not_coordinator
        return None

    async def _load_shard(self, index: int) -> None:
        started = time.monotonic()
        before = len(self.groups)
        try:
            await self._load(index)
        except asyncio.CancelledError:
            raise
        except Exception:  # an unreadable shard must not stop the others; its groups stay unserved
            log.exception("coordinator shard %s-%d could not be loaded", TOPIC, index)
            return
        finally:
            if self._loading.get(index) is asyncio.current_task():
                del self._loading[index]
        self.shards.add(index)
        log.info("coordinator shard %s-%d loaded: %d groups in %.2fs", TOPIC, index,
                 len(self.groups) - before, time.monotonic() - started)

    async def _load(self, index: int) -> None:
        """Replays one shard's partition into groups, yielding to the event loop every
        LOAD_YIELD_RECORDS records; the groups are published only once all are read."""
        stored_groups: dict[str, codec.StoredGroup | None] = {}
        offsets: dict[str, dict[tuple[str, int], OffsetAndMetadata]] = {}
        # TxnOffsetCommits by producer id, then group, until their marker (Kafka's loader too).
        pending: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        for n, rec in enumerate(self.store.replay_partition(index), 1):
            if n % LOAD_YIELD_RECORDS == 0:
                await asyncio.sleep(0)
            if isinstance(rec, LoadedMarker):
                for group_id, txn_offsets in pending.pop(rec.producer_id, {}).items():
                    if rec.commit:
                        offsets.setdefault(group_id, {}).update(txn_offsets)
                continue
            key = rec.key
            try:
                if isinstance(key, codec.OffsetKey) and rec.producer_id >= 0:
                    if rec.value is not None:
                        pending.setdefault(rec.producer_id, {}).setdefault(key.group, {})[
                            (key.topic, key.partition)] = codec.decode_offset_value(rec.value)
                elif isinstance(key, codec.OffsetKey):
                    per_group = offsets.setdefault(key.group, {})
                    if rec.value is None:
                        per_group.pop((key.topic, key.partition), None)
                    else:
                        per_group[(key.topic, key.partition)] = codec.decode_offset_value(rec.value)
                else:
                    stored_groups[key.group] = None if rec.value is None else codec.decode_group_value(rec.value)
            except codec.CodecError as e:
                log.warning("skipping an unreadable record of group %s: %s", key.group, e)
        loaded = []
        pending_groups = {g for per_pid in pending.values() for g in per_pid}
        for group_id in set(stored_groups) | set(offsets) | pending_groups:
            stored = stored_groups.get(group_id)
            group_offsets = offsets.get(group_id) or {}
            if stored is None and not group_offsets and group_id not in pending_groups:
                continue
            group = self._group_from_stored(group_id, stored)
            group.offsets = dict(group_offsets)
            group.pending_txn_offsets = {pid: dict(per_group[group_id]) for pid, per_group in pending.items()
                                         if group_id in per_group}
            self.groups[group_id] = group
            loaded.append(group)
        for group in loaded:
            for member in group.members.values():
                self._schedule_heartbeat(group, member)

    def _group_from_stored(self, group_id: str, stored: codec.StoredGroup | None) -> GroupMetadata:
        if stored is None:
            return GroupMetadata(group_id, GroupState.EMPTY, now_ms())
        state = GroupState.STABLE if stored.members else GroupState.EMPTY
        ts = stored.current_state_timestamp_ms if stored.current_state_timestamp_ms >= 0 else now_ms()
        group = GroupMetadata(group_id, state, ts)
        group.generation_id = stored.generation_id
        group.protocol_type = stored.protocol_type or None
        group.protocol_name = stored.protocol_name
        for sm in stored.members:
            member = MemberMetadata(
                member_id=sm.member_id, group_instance_id=sm.group_instance_id, client_id=sm.client_id,
                client_host=sm.client_host, rebalance_timeout_ms=sm.rebalance_timeout_ms,
                session_timeout_ms=sm.session_timeout_ms, protocol_type=stored.protocol_type,
                protocols=[(stored.protocol_name or "", sm.subscription)], assignment=sm.assignment)
            group.members[member.member_id] = member
            if member.group_instance_id is not None:
                group.static_members[member.group_instance_id] = member.member_id
        group.leader_id = stored.leader_id if stored.leader_id in group.members else next(iter(group.members), None)
        return group

    # -- timers ------------------------------------------------------------------------------
    def _later(self, delay_ms: int, fn: Callable[..., None], *args: Any) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, fn, *args)

    def _schedule_heartbeat(self, group: GroupMetadata, member: MemberMetadata, timeout_ms: int | None = None) -> None:
        """Kafka's completeAndScheduleNextHeartbeatExpiration: a fresh session deadline."""
        _cancel(member.heartbeat_timer)
        member.heartbeat_timer = self._later(timeout_ms if timeout_ms is not None else member.session_timeout_ms,
                                             self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: GroupMetadata, member: MemberMetadata) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member or not member.expired_heartbeat_matters():
            return
        log.info("group %s: member %s missed its session timeout; removing it", group.group_id, member.member_id)
        self._remove_member_and_update_group(group, member, "session timeout")

    def _on_pending_member_expired(self, group: GroupMetadata, member_id: str) -> None:
        if group.pending_members.pop(member_id, "absent") == "absent":
            return
        log.info("group %s: pending member %s never rejoined; forgetting it", group.group_id, member_id)
        self._try_complete_join(group)

    # -- validation helpers ------------------------------------------------------------------
    def _validate_member(self, group: GroupMetadata, member_id: str, instance_id: str | None) -> ErrorCode | None:
        if group.is_static_member_fenced(member_id, instance_id):
            return ErrorCode.fenced_instance_id
        if not group.has(member_id):
            return ErrorCode.unknown_member_id
        return None

    # -- JoinGroup ---------------------------------------------------------------------------
    async def join_group(
        self, *, group_id: str, member_id: str, group_instance_id: str | None, require_known_member_id: bool,
        client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
        protocol_type: str, protocols: list[tuple[str, bytes]],
    ) -> JoinResult:
        if not group_id:
            return JoinResult(ErrorCode.invalid_group_id, member_id)
        if (error := self.not_here(group_id)) is not None:
            return JoinResult(error, member_id)
        if not self.min_session_timeout_ms <= session_timeout_ms <= self.max_session_timeout_ms:
            return JoinResult(ErrorCode.invalid_session_timeout, member_id)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms  # JoinGroup v0 has no rebalance timeout
        waiter: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        is_unknown = member_id == ""
        group = self.groups.get(group_id)
        if group is None:
            if not is_unknown:
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms())
        args = (group_instance_id, client_id, client_host, rebalance_timeout_ms, session_timeout_ms,
                protocol_type, protocols, waiter)
        if is_unknown:
            immediate = self._join_new_member(group, require_known_member_id, *args)
        else:
            immediate = self._join_current_member(group, member_id, *args)
        if immediate is not None:
            return immediate
        return await waiter

    def _join_new_member(self, group: GroupMetadata, require_known_member_id: bool, instance_id: str | None,
                         client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                         protocol_type: str, protocols: list[tuple[str, bytes]], waiter: asyncio.Future) -> JoinResult | None:
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available)
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return JoinResult(ErrorCode.inconsistent_group_protocol)
        new_member_id = f"{client_id}-{uuid.uuid4()}"
        if instance_id is not None:
            old_member_id = group.static_member_id(instance_id)
            if old_member_id is None:
                self._add_member_and_rebalance(group, new_member_id, instance_id, client_id, client_host,
                                               rebalance_timeout_ms, session_timeout_ms, protocol_type, protocols, waiter)
                return None
            return self._update_static_member_and_rebalance(
                group, old_member_id, new_member_id, instance_id, rebalance_timeout_ms, session_timeout_ms,
                protocols, waiter)
        if require_known_member_id:
            # KIP-394: hand out the id first; the member rejoins with it.
            timer = self._later(session_timeout_ms, self._on_pending_member_expired, group, new_member_id)
            group.add_pending_member(new_member_id, timer)
            return JoinResult(ErrorCode.member_id_required, new_member_id)
        self._add_member_and_rebalance(group, new_member_id, None, client_id, client_host, rebalance_timeout_ms,
                                       session_timeout_ms, protocol_type, protocols, waiter)
        return None

    def _join_current_member(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                             client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                             protocol_type: str, protocols: list[tuple[str, bytes]], waiter: asyncio.Future) -> JoinResult | None:
        if group.is_(GroupState.DEAD):
            return JoinResult(ErrorCode.coordinator_not_available, member_id)
        if not group.supports_protocols(protocol_type, [n for n, _ in protocols]):
            return JoinResult(ErrorCode.inconsistent_group_protocol, member_id)
        if group.is_pending_member(member_id):
            if instance_id is not None:
                # A static member never gets MEMBER_ID_REQUIRED, so its id cannot be pending.
                return JoinResult(ErrorCode.unknown_member_id, member_id)
            _cancel(group.pending_members.get(member_id))
            self._add_member_and_rebalance(group, member_id, None, client_id, client_host, rebalance_timeout_ms,
                                           session_timeout_ms, protocol_type, protocols, waiter)
            return None
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return JoinResult(error, member_id)
        member = group.get(member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
            return None
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(protocols):
                # The member lost our answer and asks again: same answer.
                return self._current_join_result(group, member)
            self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
            return None
        if group.is_(GroupState.STABLE):
            if group.is_leader(member_id) or not member.matches(protocols):
                # The leader rejoining means it wants a new assignment (e.g. metadata changed).
                self._update_member_and_rebalance(group, member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
                return None
            return self._current_join_result(group, member)
        return JoinResult(ErrorCode.unknown_member_id, member_id)

    def _current_join_result(self, group: GroupMetadata, member: MemberMetadata) -> JoinResult:
        is_leader = group.is_leader(member.member_id)
        return JoinResult(
            ErrorCode.none, member.member_id, group.generation_id, group.protocol_type, group.protocol_name,
            group.leader_id or "", group.current_member_metadata() if is_leader else [])

    def _add_member_and_rebalance(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                                  client_id: str, client_host: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                                  protocol_type: str, protocols: list[tuple[str, bytes]], waiter: asyncio.Future) -> None:
        member = MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout_ms,
                                session_timeout_ms, protocol_type, list(protocols), is_new=True, join_waiter=waiter)
        if group.is_(GroupState.PREPARING_REBALANCE) and group.generation_id == 0:
            group.new_member_added = True
        group.add(member)
        self._schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        self._try_complete_join(group)

    def _update_member_and_rebalance(self, group: GroupMetadata, member: MemberMetadata,
                                     protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                                     session_timeout_ms: int, waiter: asyncio.Future) -> None:
        self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
        self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        self._try_complete_join(group)

    @staticmethod
    def _update_member(member: MemberMetadata, protocols: list[tuple[str, bytes]], rebalance_timeout_ms: int,
                       session_timeout_ms: int, waiter: asyncio.Future) -> None:
        member.protocols = list(protocols)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if member.join_waiter is not None and member.join_waiter is not waiter:
            # A second JoinGroup while the first still waits (e.g. on another connection).
            _resolve(member.join_waiter, JoinResult(ErrorCode.rebalance_in_progress, member.member_id))
        member.join_waiter = waiter

    def _update_static_member_and_rebalance(self, group: GroupMetadata, old_member_id: str, new_member_id: str,
                                            instance_id: str, rebalance_timeout_ms: int, session_timeout_ms: int,
                                            protocols: list[tuple[str, bytes]], waiter: asyncio.Future) -> JoinResult | None:
        """KIP-345: a known instance id joins with no member id; it takes over the old member's
        place. In a Stable group whose protocol choice does not change, no rebalance happens."""
        old = group.get(old_member_id)
        fenced = ErrorCode.fenced_instance_id
        _resolve(old.join_waiter, JoinResult(fenced, old_member_id))
        _resolve(old.sync_waiter, SyncResult(fenced))
        old.join_waiter = old.sync_waiter = None
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self._schedule_heartbeat(group, member)
        old_protocols = member.protocols
        if group.is_(GroupState.STABLE):
            member.protocols = list(protocols)
            if group.protocol_name == group.select_protocol():
                member.rebalance_timeout_ms = rebalance_timeout_ms
                member.session_timeout_ms = session_timeout_ms
                self._spawn(self._store_static_rejoin(group, self._group_record(group), instance_id, old_member_id,
                                                      new_member_id, old_protocols, waiter))
                return None
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
            self._maybe_prepare_rebalance(group, f"static member {instance_id} changed its protocols")
        elif group.is_(GroupState.COMPLETING_REBALANCE):
            # The leader may be assigning to the old member id: rebalance again.
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
            self._prepare_rebalance(group, f"static member {instance_id} rejoined during CompletingRebalance")
        else:  # PreparingRebalance: it simply counts as joined.
            self._update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, waiter)
        self._try_complete_join(group)
        return None

    async def _store_static_rejoin(self, group: GroupMetadata, record: list[tuple[bytes, bytes | None]],
                                   instance_id: str, old_member_id: str,
                                   new_member_id: str, old_protocols: list[tuple[str, bytes]],
                                   waiter: asyncio.Future) -> None:
        """The static member's new id is answered once the in-sync replicas hold it; if they
        cannot, the change is undone, as Kafka does, so the old member id stays valid."""
        try:
            code = await self._write(group.group_id, record)
            if group.static_member_id(instance_id) != new_member_id:
                _resolve(waiter, JoinResult(ErrorCode.fenced_instance_id, new_member_id))
            elif code != ErrorCode.none:
                group.get(new_member_id).protocols = old_protocols
                group.replace_static_member(instance_id, new_member_id, old_member_id)
                _resolve(waiter, JoinResult(code, ""))
            else:
                log.info("group %s: static member %s rejoined as %s without a rebalance",
                         group.group_id, instance_id, new_member_id)
                is_leader = group.is_leader(new_member_id)
                _resolve(waiter, JoinResult(ErrorCode.none, new_member_id, group.generation_id,
                                            group.protocol_type, group.protocol_name, group.leader_id or "",
                                            group.current_member_metadata() if is_leader else [],
                                            skip_assignment=is_leader))
        finally:
            _resolve(waiter, JoinResult(ErrorCode.not_coordinator, new_member_id))

    # -- rebalancing -------------------------------------------------------------------------
    def _maybe_prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason)

    def _prepare_rebalance(self, group: GroupMetadata, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        _cancel(group.sync_timer)
        group.sync_timer = None
        group.pending_sync.clear()
        _cancel(group.join_timer)
        was_empty = group.is_(GroupState.EMPTY)
        group.transition_to(GroupState.PREPARING_REBALANCE, now_ms())
        log.info("group %s: preparing to rebalance at generation %d (%s)", group.group_id, group.generation_id, reason)
        if was_empty:
            delay = self.initial_rebalance_delay_ms
            remaining = max(group.max_rebalance_timeout_ms() - delay, 0)
            group.initial_delay_active = True
            group.new_member_added = False
            group.join_timer = self._later(delay, self._on_initial_delay_expired, group, remaining)
        else:
            group.initial_delay_active = False
            group.join_timer = self._later(group.max_rebalance_timeout_ms(), self._complete_join, group)

    def _on_initial_delay_expired(self, group: GroupMetadata, remaining_ms: int) -> None:
        group.join_timer = None
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        if group.new_member_added and remaining_ms > 0:
            group.new_member_added = False
            delay = min(self.initial_rebalance_delay_ms, remaining_ms)
            group.join_timer = self._later(delay, self._on_initial_delay_expired, group,
                                           max(remaining_ms - delay, 0))
            return
        group.initial_delay_active = False
        self._complete_join(group)

    def _try_complete_join(self, group: GroupMetadata) -> None:
        """Kafka's DelayedJoin.tryComplete: done once every known member has rejoined."""
        if (group.is_(GroupState.PREPARING_REBALANCE) and not group.initial_delay_active
                and group.has_all_members_joined()):
            self._complete_join(group)

    def _complete_join(self, group: GroupMetadata) -> None:
        if not group.is_(GroupState.PREPARING_REBALANCE):
            return
        _cancel(group.join_timer)
        group.join_timer = None
        group.initial_delay_active = False
        for member in group.not_yet_rejoined():
            if not member.is_static:
                log.info("group %s: removing member %s, which did not rejoin in time", group.group_id, member.member_id)
                _cancel(member.heartbeat_timer)
                _resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
                group.remove(member.member_id)
        if group.members and not group.maybe_elect_new_joined_leader():
            # Nobody rejoined (only static members that went quiet): wait another round; their
            # session timeouts will remove them.
            log.warning("group %s: no member rejoined; waiting another rebalance timeout", group.group_id)
            group.join_timer = self._later(group.max_rebalance_timeout_ms(), self._complete_join, group)
            return
        group.init_next_generation(now_ms())
        if group.is_(GroupState.EMPTY):
            log.info("group %s: now empty at generation %d", group.group_id, group.generation_id)
            self._spawn(self._store_empty_group(group.group_id, self._group_record(group)))
            return
        log.info("group %s: generation %d with protocol %s, leader %s, %d members", group.group_id,
                 group.generation_id, group.protocol_name, group.leader_id, len(group.members))
        for member in group.members.values():
            is_leader = group.is_leader(member.member_id)
            result = JoinResult(ErrorCode.none, member.member_id, group.generation_id, group.protocol_type,
                                group.protocol_name, group.leader_id or "",
                                group.current_member_metadata() if is_leader else [])
            _resolve(member.join_waiter, result)
            member.join_waiter = None
            member.is_new = False
            self._schedule_heartbeat(group, member)
            group.pending_sync.add(member.member_id)
        group.sync_timer = self._later(group.max_rebalance_timeout_ms(), self._on_sync_expired, group,
                                       group.generation_id)

    def _on_sync_expired(self, group: GroupMetadata, generation_id: int) -> None:
        """Members that got their JoinGroup answer must SyncGroup within the rebalance timeout."""
        group.sync_timer = None
        if group.generation_id != generation_id or not group.pending_sync:
            return
        if not (group.is_(GroupState.COMPLETING_REBALANCE) or group.is_(GroupState.STABLE)):
            return
        late = [group.members[m] for m in list(group.pending_sync) if m in group.members]
        log.info("group %s: members %s did not SyncGroup in time; removing them", group.group_id,
                 [m.member_id for m in late])
        for member in late:
            _cancel(member.heartbeat_timer)
            _resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
            group.remove(member.member_id)
        self._prepare_rebalance(group, "members did not sync in time")
        self._try_complete_join(group)

    def _reset_and_propagate_assignment_error(self, group: GroupMetadata, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            _resolve(member.sync_waiter, SyncResult(error))
            member.sync_waiter = None

    def _remove_member_and_update_group(self, group: GroupMetadata, member: MemberMetadata, reason: str) -> None:
        _resolve(member.join_waiter, JoinResult(ErrorCode.unknown_member_id, member.member_id))
        _resolve(member.sync_waiter, SyncResult(ErrorCode.unknown_member_id))
        member.join_waiter = member.sync_waiter = None
        _cancel(member.heartbeat_timer)
        member.heartbeat_timer = None
        group.remove(member.member_id)
        if group.is_(GroupState.STABLE) or group.is_(GroupState.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, f"removing member {member.member_id}: {reason}")
        self._try_complete_join(group)

    # -- SyncGroup ---------------------------------------------------------------------------
    async def sync_group(self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None,
                         protocol_type: str | None, protocol_name: str | None,
                         assignments: dict[str, bytes]) -> SyncResult:
        if not group_id:
            return SyncResult(ErrorCode.invalid_group_id)
        if (error := self.not_here(group_id)) is not None:
            return SyncResult(error)
        group = self.groups.get(group_id)
        if group is None:
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.DEAD):
            return SyncResult(ErrorCode.coordinator_not_available)
        error = self._validate_member(group, member_id, group_instance_id)
        if error is not None:
            return SyncResult(error)
        if generation_id != group.generation_id:
            return SyncResult(ErrorCode.illegal_generation)
        if protocol_type is not None and protocol_type != group.protocol_type:
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        if protocol_name is not None and protocol_name != group.protocol_name:
            return SyncResult(ErrorCode.inconsistent_group_protocol)
        member = group.get(member_id)
        if group.is_(GroupState.EMPTY):
            return SyncResult(ErrorCode.unknown_member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return SyncResult(ErrorCode.rebalance_in_progress)
        if group.is_(GroupState.STABLE):
            group.pending_sync.discard(member_id)
            self._schedule_heartbeat(group, member)
            return SyncResult(ErrorCode.none, member.assignment, group.protocol_type, group.protocol_name)
        # CompletingRebalance: wait for the leader's assignments.
        waiter: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        if member.sync_waiter is not None:
            _resolve(member.sync_waiter, SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_waiter = waiter
        group.pending_sync.discard(member_id)
        if group.is_leader(member_id):
            # The assignment is answered once the in-sync replicas hold it (Kafka: storeGroup
            # with acks=all), so a member never works from an assignment a new coordinator lacks.
            full = {m: assignments.get(m, b"") for m in group.members}
            generation = group.generation_id
            code = await self._write(group_id, self._group_record(group, full))
            if group.generation_id != generation or not group.is_(GroupState.COMPLETING_REBALANCE):
                pass  # the group moved on meanwhile; its members were answered by that change
            elif code != ErrorCode.none:
                log.warning("group %s: could not store the assignment: %s", group_id, code.name)
                self._reset_and_propagate_assignment_error(group, code)
                self._maybe_prepare_rebalance(group, f"error {code.name} storing the assignment")
            else:
                self._set_and_propagate_assignment(group, full)
        return await waiter

    def _set_and_propagate_assignment(self, group: GroupMetadata, assignments: dict[str, bytes]) -> None:
        for member_id, member in group.members.items():
            member.assignment = assignments.get(member_id, b"")
        for member in group.members.values():
            if member.sync_waiter is not None:
                _resolve(member.sync_waiter, SyncResult(ErrorCode.none, member.assignment, group.protocol_type,
                                                        group.protocol_name))
                member.sync_waiter = None
                self._schedule_heartbeat(group, member)
        group.transition_to(GroupState.STABLE, now_ms())
        log.info("group %s: stable at generation %d", group.group_id, group.generation_id)

    # -- Heartbeat ---------------------------------------------------------------------------
    def heartbeat(self, *, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        if (error := self.not_here(group_id)) is not None:
            return error
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        error = self._validate_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        member = group.get(member_id)
        if group.is_(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        self._schedule_heartbeat(group, member)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return ErrorCode.none

    # -- LeaveGroup --------------------------------------------------------------------------
    def leave_group(self, group_id: str, leaving: list[LeaveMember]) -> tuple[ErrorCode, list[ErrorCode]]:
        """Top-level error and one error per leaving member."""
        if not group_id:
            return ErrorCode.invalid_group_id, []
        if (error := self.not_here(group_id)) is not None:
            return error, []
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.none, [ErrorCode.unknown_member_id for _ in leaving]
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available, []
        results = []
        for lm in leaving:
            results.append(self._leave_one(group, lm))
        return ErrorCode.none, results

    def _leave_one(self, group: GroupMetadata, lm: LeaveMember) -> ErrorCode:
        if lm.member_id == "":
            # KIP-345 admin removal by instance id.
            known = group.static_member_id(lm.group_instance_id)
            if known is None:
                return ErrorCode.unknown_member_id
            self._remove_member_and_update_group(group, group.get(known), f"instance {lm.group_instance_id} left")
            return ErrorCode.none
        if group.is_pending_member(lm.member_id):
            _cancel(group.pending_members.pop(lm.member_id))
            self._try_complete_join(group)
            return ErrorCode.none
        error = self._validate_member(group, lm.member_id, lm.group_instance_id)
        if error is not None:
            return error
        self._remove_member_and_update_group(group, group.get(lm.member_id), "left the group")
        return ErrorCode.none

    # -- administration ----------------------------------------------------------------------
    def list_groups(self) -> tuple[ErrorCode, list[GroupOverview]]:
        """The groups of the shards loaded here (clients ask every broker and merge)."""
        if not self.active:
            return ErrorCode.coordinator_not_available, []
        # While a shard loads, Kafka answers the groups it has with COORDINATOR_LOAD_IN_PROGRESS.
        error = ErrorCode.coordinator_load_in_progress if self._loading else ErrorCode.none
        return error, [GroupOverview(g.group_id, g.protocol_type or "", g.state.value)
                                for g in self.groups.values() if not g.is_(GroupState.DEAD)]

    def describe_group(self, group_id: str) -> GroupSummary:
        if (error := self.not_here(group_id)) is not None:
            return GroupSummary(group_id, error, "", "", "", [])
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return GroupSummary(group_id, ErrorCode.group_id_not_found, GroupState.DEAD.value, "", "", [])
        stable = group.is_(GroupState.STABLE)
        members = [MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                 m.metadata_for(group.protocol_name) if stable else b"",
                                 m.assignment if stable else b"")
                   for m in group.members.values()]
        return GroupSummary(group_id, ErrorCode.none, group.state.value, group.protocol_type or "",
                            (group.protocol_name or "") if stable else "", members)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """Each empty group's tombstones are answered once the in-sync replicas hold them, so a
        deleted group does not come back with a new coordinator."""
        out: dict[str, ErrorCode] = {}
        for group_id in group_ids:
            if (error := self.not_here(group_id)) is not None:
                out[group_id] = error
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                out[group_id] = ErrorCode.group_id_not_found
            elif not group.is_(GroupState.EMPTY):
                out[group_id] = ErrorCode.non_empty_group
            else:
                out[group_id] = await self._delete_group(group)
        return out

    async def _delete_group(self, group: GroupMetadata) -> ErrorCode:
        entries: list[tuple[bytes, bytes | None]] = [
            (codec.encode_offset_key(codec.OffsetKey(group.group_id, t, p)), None) for t, p in group.offsets]
        entries.append((codec.encode_group_key(codec.GroupKey(group.group_id)), None))
        code = await self._write(group.group_id, entries)
        if code != ErrorCode.none:
            return code
        if self.groups.get(group.group_id) is not group or not group.is_(GroupState.EMPTY):
            return ErrorCode.none  # unloaded, or joined again meanwhile: its newer records follow
        group.transition_to(GroupState.DEAD, now_ms())
        _cancel(group.join_timer)
        _cancel(group.sync_timer)
        self.groups.pop(group.group_id, None)
        log.info("group %s deleted", group.group_id)
        return ErrorCode.none



