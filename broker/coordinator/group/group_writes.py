"""The group coordinator's writes to `__consumer_offsets`: every one is acks=all (Kafka's), answered
once the in-sync replicas hold it (through the PartitionWriter), so what a client was told
survives the loss of its coordinator's broker."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from broker.coordinator.group import codec
from broker.coordinator.group.append_errors import coordinator_error
from broker.coordinator.group.group_metadata import GroupMetadata
from broker.coordinator.group.offsets_log import Appended, StoreError

log = logging.getLogger(__name__)


class GroupWrites:
    """Part of GroupCoordinator (coordinator/group/coordinator.py), whose state it uses."""

    async def _await_in_sync_replicas(self, appended: Appended) -> ErrorCode:
        """NONE once the in-sync replicas hold `appended` (bounded by offsets.commit.timeout.ms),
        else the coordinator error Kafka answers for the failed write."""
        return coordinator_error(await self.writer.wait_for_isr(appended.part, appended.leader_epoch,
                                                                appended.end_offset, self.commit_timeout_ms / 1000))

    async def _write(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append records of one group and wait for its in-sync replicas: every coordinator
        write is acks=all, as Kafka's, so what a client was told survives its coordinator."""
        code, _ = await self._write_at(group_id, entries)
        return code

    async def _write_at(self, group_id: str, entries: list[tuple[bytes, bytes | None]]
                        ) -> tuple[ErrorCode, Appended | None]:
        try:
            appended = self.store.append(group_id, entries)
        except StoreError as e:
            return e.code, None
        if appended is None:
            return ErrorCode.none, None
        return await self._await_in_sync_replicas(appended), appended

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)

    async def _store_empty_group(self, group_id: str, entries: list[tuple[bytes, bytes | None]]) -> None:
        code = await self._write(group_id, entries)
        if code != ErrorCode.none:
            log.warning("group %s: could not store empty group: %s", group_id, code.name)

    @staticmethod
    def _group_record(group: GroupMetadata, assignments: dict[str, bytes] | None = None
                      ) -> list[tuple[bytes, bytes | None]]:
        """The group's metadata record (after a rebalance, or a static member's new id)."""
        members = tuple(
            codec.StoredMember(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                               m.rebalance_timeout_ms, m.session_timeout_ms, m.metadata_for(group.protocol_name),
                               (assignments or {}).get(m.member_id, m.assignment) if assignments is not None
                               else m.assignment)
            for m in group.members.values())
        value = codec.StoredGroup(group.protocol_type or "", group.generation_id, group.protocol_name,
                                  group.leader_id, group.state_timestamp_ms, members)
        return [(codec.encode_group_key(codec.GroupKey(group.group_id)), codec.encode_group_value(value))]
