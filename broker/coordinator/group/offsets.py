"""Committed offsets of classic groups, apart from membership (Kafka's GroupMetadataManager beside
its GroupCoordinator): OffsetCommit, TxnOffsetCommit and the transaction markers that settle it
(KIP-98), OffsetFetch, OffsetDelete and offset expiry (offsets.retention.minutes)."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.coordinator.group import codec
from broker.coordinator.group.group_metadata import GroupMetadata, GroupState, OffsetAndMetadata
from broker.coordinator.group.offsets_log import Appended, StoreError
from broker.coordinator.group.subscriptions import subscribed_topics

log = logging.getLogger(__name__)


def now_ms() -> int:
    return int(time.time() * 1000)


# Largest metadata string kept with a committed offset (Kafka's offset.metadata.max.bytes).
OFFSET_METADATA_MAX_BYTES = 4096


@dataclass
class PendingCommit:
    """Offsets appended to __consumer_offsets, applied to the group once acknowledged (Kafka's
    pending offset commits)."""

    group: GroupMetadata
    offsets: dict[tuple[str, int], OffsetAndMetadata]
    appended: Appended

    def apply(self) -> None:
        written_at = self.group.offset_written_at
        for tp, om in self.offsets.items():
            if written_at.get(tp, -1) <= self.appended.end_offset:
                self.group.offsets[tp] = om
                written_at[tp] = self.appended.end_offset


class GroupOffsets:
    """Part of GroupCoordinator (coordinator/group/coordinator.py), whose state it uses."""

    # -- offsets -----------------------------------------------------------------------------
    async def commit_offsets(self, *, group_id: str, member_id: str, group_instance_id: str | None,
                             generation_id: int, offsets: dict[tuple[str, int], OffsetAndMetadata]
                             ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit as Kafka's GroupMetadataManager.storeOffsets: the commit is appended to
        the group's __consumer_offsets partition and answered once its in-sync replicas hold it
        (acks=all, bounded by offsets.commit.timeout.ms); only then do the offsets apply, so an
        acknowledged commit survives the loss of its coordinator's broker. Failures answer as
        Kafka maps them: COORDINATOR_NOT_AVAILABLE (too few in-sync replicas), NOT_COORDINATOR
        (leadership moved), REQUEST_TIMED_OUT."""
        results, pending = self._commit(group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
                                        generation_id=generation_id, offsets=offsets)
        if pending is None:
            return results
        code = await self._await_in_sync_replicas(pending.appended)
        if code == ErrorCode.none:
            pending.apply()
        else:
            results.update({tp: code for tp in pending.offsets})
        return results

    def _commit(self, *, group_id: str, member_id: str, group_instance_id: str | None, generation_id: int,
                offsets: dict[tuple[str, int], OffsetAndMetadata]
                ) -> tuple[dict[tuple[str, int], ErrorCode], "PendingCommit | None"]:
        """Validates and appends a commit; the caller applies it (`PendingCommit.apply`)."""
        def all_(code: ErrorCode) -> tuple[dict[tuple[str, int], ErrorCode], None]:
            return {tp: code for tp in offsets}, None

        if (error := self.not_here(group_id)) is not None:
            return all_(error)
        image = self.metadata.image
        # Partitions led by other brokers are accepted: only unknown ones are refused.
        unknown = {tp: ErrorCode.unknown_topic_or_partition for tp in offsets
                   if tp[0] not in image.topics or not 0 <= tp[1] < image.topics[tp[0]].partitions}
        if unknown:
            known = {tp: om for tp, om in offsets.items() if tp not in unknown}
            results, pending = self._commit(group_id=group_id, member_id=member_id,
                                            group_instance_id=group_instance_id, generation_id=generation_id,
                                            offsets=known) if known else ({}, None)
            return {**results, **unknown}, pending
        group = self.groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                # A generation from a group that no longer exists (or never did).
                return all_(ErrorCode.illegal_generation)
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms())
        error = self._validate_commit(group, member_id, group_instance_id, generation_id)
        if error is not None:
            return all_(error)
        member = group.members.get(member_id)
        if member is not None:
            self._schedule_heartbeat(group, member)  # a commit counts as a heartbeat
        results: dict[tuple[str, int], ErrorCode] = {}
        entries: list[tuple[bytes, bytes | None]] = []
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                results[tp] = ErrorCode.offset_metadata_too_large
                continue
            entries.append((codec.encode_offset_key(codec.OffsetKey(group_id, tp[0], tp[1])),
                            codec.encode_offset_value(om)))
            accepted[tp] = om
        appended = None
        if entries:
            try:
                appended = self.store.append(group_id, entries)
            except StoreError as e:
                for tp in accepted:
                    results[tp] = e.code
                accepted = {}
        for tp in accepted:
            results[tp] = ErrorCode.none
        if not accepted or appended is None:
            return results, None
        return results, PendingCommit(group, accepted, appended)

    def _validate_commit(self, group: GroupMetadata, member_id: str, instance_id: str | None,
                         generation_id: int) -> ErrorCode | None:
        if group.is_(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if generation_id >= 0 or member_id != "" or instance_id is not None:
            error = self._validate_member(group, member_id, instance_id)
            if error is not None:
                return error
            if generation_id != group.generation_id:
                return ErrorCode.illegal_generation
            if group.is_(GroupState.COMPLETING_REBALANCE):
                # The member has its new generation but not its assignment yet.
                return ErrorCode.rebalance_in_progress
            return None
        if not group.is_(GroupState.EMPTY):
            # Only members may commit to a group that has members.
            return ErrorCode.unknown_member_id
        return None

    # -- transactional offsets (KIP-98) ------------------------------------------------------
    async def txn_commit_offsets(self, *, group_id: str, producer_id: int, producer_epoch: int, member_id: str,
                                 group_instance_id: str | None, generation_id: int,
                                 offsets: dict[tuple[str, int], OffsetAndMetadata]) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit as Kafka's: the offsets are written to the group's partition in a
        transactional batch of the producer and answered once the in-sync replicas hold them,
        but they apply only when the transaction's COMMIT marker reaches this partition
        (`on_txn_marker`); until then OffsetFetch does not show them."""
        def all_(code: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
            return {tp: code for tp in offsets}

        if (error := self.not_here(group_id)) is not None:
            return all_(error)
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = GroupMetadata(group_id, GroupState.EMPTY, now_ms())
        if group.is_(GroupState.DEAD):
            return all_(ErrorCode.coordinator_not_available)
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            # KIP-447: a member's commit is checked against the group as it is now.
            error = self._validate_member(group, member_id, group_instance_id)
            if error is None and generation_id != group.generation_id:
                error = ErrorCode.illegal_generation
            if error is not None:
                return all_(error)
        results: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for tp, om in offsets.items():
            if len(om.metadata.encode()) > OFFSET_METADATA_MAX_BYTES:
                results[tp] = ErrorCode.offset_metadata_too_large
            else:
                accepted[tp] = om
        if not accepted:
            return results
        entries: list[tuple[bytes, bytes | None]] = [
            (codec.encode_offset_key(codec.OffsetKey(group_id, t, p)), codec.encode_offset_value(om))
            for (t, p), om in accepted.items()]
        try:
            appended = self.store.append(group_id, entries, producer=(producer_id, producer_epoch))
        except StoreError as e:
            return {**results, **{tp: e.code for tp in accepted}}
        assert appended is not None
        code = await self._await_in_sync_replicas(appended)
        if code == ErrorCode.none:
            group.pending_txn_offsets.setdefault(producer_id, {}).update(accepted)
        return {**results, **{tp: code for tp in accepted}}

    def on_txn_marker(self, partition: int, producer_id: int, commit: bool) -> None:
        """A COMMIT/ABORT marker of `producer_id` was appended to __consumer_offsets-`partition`
        (by the WriteTxnMarkers handler): its pending TxnOffsetCommits apply or are dropped."""
        for group in list(self.groups.values()):
            if self.store.partition_for(group.group_id) != partition:
                continue
            txn_offsets = group.pending_txn_offsets.pop(producer_id, None)
            if txn_offsets and commit:
                group.offsets.update(txn_offsets)

    def pending_txn_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """Partitions with a TxnOffsetCommit not yet decided (OffsetFetch's require_stable)."""
        group = self.groups.get(group_id)
        if group is None:
            return set()
        return {tp for per_pid in group.pending_txn_offsets.values() for tp in per_pid}

    def fetch_offsets(self, group_id: str, partitions: list[tuple[str, int]] | None
                      ) -> tuple[ErrorCode, dict[tuple[str, int], OffsetAndMetadata | None]]:
        """Committed offsets (None where there is none); all of them when `partitions` is None."""
        if (error := self.not_here(group_id)) is not None:
            return error, {}
        group = self.groups.get(group_id)
        stored = group.offsets if group is not None and not group.is_(GroupState.DEAD) else {}
        if partitions is None:
            return ErrorCode.none, dict(stored)
        return ErrorCode.none, {tp: stored.get(tp) for tp in partitions}

    async def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]
                             ) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        """OffsetDelete as Kafka's coordinator: GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP for an active
        group that is not a consumer group; per partition GROUP_SUBSCRIBED_TO_TOPIC when the active
        group consumes its topic, else NONE (committed or not). The committed ones are removed by
        tombstones answered once the in-sync replicas hold them, so they stay gone after a restart."""
        if (error := self.not_here(group_id)) is not None:
            return error, {}
        group = self.groups.get(group_id)
        if group is None or group.is_(GroupState.DEAD):
            return ErrorCode.group_id_not_found, {}
        if not group.is_(GroupState.EMPTY) and group.protocol_type != "consumer":
            return ErrorCode.non_empty_group, {}
        subscribed = set() if group.is_(GroupState.EMPTY) else subscribed_topics(
            group.protocol_type, (m.metadata_for(group.protocol_name) for m in group.members.values())) or set()
        results = {tp: ErrorCode.group_subscribed_to_topic if tp[0] in subscribed else ErrorCode.none
                   for tp in partitions}
        doomed = [tp for tp, code in results.items() if code == ErrorCode.none and tp in group.offsets]
        if not doomed:
            return ErrorCode.none, results
        entries: list[tuple[bytes, bytes | None]] = [
            (codec.encode_offset_key(codec.OffsetKey(group_id, t, p)), None) for t, p in doomed]
        code, appended = await self._write_at(group_id, entries)
        if code != ErrorCode.none:
            return code, {}
        if appended is not None and self.groups.get(group_id) is group:
            for tp in doomed:
                if group.offset_written_at.get(tp, -1) <= appended.end_offset:  # not committed again meanwhile
                    group.offsets.pop(tp, None)
                    group.offset_written_at.pop(tp, None)
        log.info("group %s: deleted the offsets of %d partitions", group_id, len(doomed))
        return ErrorCode.none, results

    # -- offset expiry -----------------------------------------------------------------------
    async def _expiry_loop(self) -> None:
        while True:
            await asyncio.sleep(self.offsets_retention_check_ms / 1000)
            try:
                await self.expire_offsets(now_ms())
            except Exception:
                log.exception("offset expiry failed")

    async def expire_offsets(self, now: int) -> int:
        """Kafka 2.1+ rules: offsets of an empty group expire `offsets.retention.minutes` after it
        became empty (a group without a protocol type: after each offset's commit); an empty
        group without offsets is removed. The tombstones count once the in-sync replicas hold
        them. Returns how many offsets expired."""
        removed = 0
        for group in list(self.groups.values()):
            if not group.is_(GroupState.EMPTY):
                continue
            if group.protocol_type:
                expired = list(group.offsets) if group.state_timestamp_ms + self.offsets_retention_ms <= now else []
            else:
                expired = [tp for tp, om in group.offsets.items()
                           if om.commit_timestamp_ms + self.offsets_retention_ms <= now]
            entries: list[tuple[bytes, bytes | None]] = [
                (codec.encode_offset_key(codec.OffsetKey(group.group_id, t, p)), None) for t, p in expired]
            if expired and len(expired) == len(group.offsets):
                entries.append((codec.encode_group_key(codec.GroupKey(group.group_id)), None))
            elif not group.offsets and group.state_timestamp_ms + self.offsets_retention_ms <= now:
                entries.append((codec.encode_group_key(codec.GroupKey(group.group_id)), None))
            if not entries:
                continue
            code, appended = await self._write_at(group.group_id, entries)
            if code != ErrorCode.none or appended is None:
                log.warning("group %s: could not expire offsets: %s", group.group_id, code.name)
                continue
            for tp in expired:
                if group.offset_written_at.get(tp, -1) <= appended.end_offset:  # not committed again meanwhile
                    group.offsets.pop(tp, None)
                    removed += 1
            if not group.offsets and group.is_(GroupState.EMPTY) and self.groups.get(group.group_id) is group:
                group.transition_to(GroupState.DEAD, now)
                self.groups.pop(group.group_id, None)
        return removed
