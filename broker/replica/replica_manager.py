"""Owns the partitions this broker holds: opening logs, appending, reading and checkpointing.

Which partitions are open here follows the cluster metadata image: this broker opens the logs
of the partitions it leads or follows (its id is among the replicas) and closes the others.
A partition it leads carries a `LeaderReplicaState` (replica/replica_state.py): followers' fetches
move it (`follower_fetched`), the high watermark is the least log end over the ISR, and ISR
shrinks and expands are written to the topic's metadata record (replica/isr_updates.py). A
partition it follows is written by the replica fetcher (replica/replica_fetcher.py), which the
`on_follow_change` listeners tell what to fetch from whom.
acks=all produces wait in `produce_purgatory` (replica/delayed_produce.py), watched per partition
and checked whenever that partition's high watermark moves or its leadership changes.
DeleteRecords (KIP-107, replica/record_deletion.py) moves a led partition's log start offset and
waits in `delete_records_purgatory` (replica/delayed_delete_records.py) for the low watermark, the
least log start offset over the live replicas; it is checked whenever a follower's fetch reports its
log start, the live brokers change or leadership ends.
At start-up, partition directories the metadata no longer places here are set aside first
(replica/stray_logs.py).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import shutil
import threading
import time
from pathlib import Path
from typing import Callable

from kio.schema.errors import ErrorCode

from broker.config import BrokerConfig
from broker.controller.assignment import NO_LEADER
from broker.log import checkpoints
from broker.log.durable import fsync_directory
from broker.log.log import Log, LogConfig, LogDirOffline, LogError, StorageError
from broker.log import cleaner_settings
from broker.log.cleaner import LogCleaner
from broker.metadata.store import MetadataStore, PartitionState, TopicRecord
from broker.replica import partition_metadata, reassignment_metrics
from broker.replica import stray_logs
from broker.replica.appends import Appends
from broker.replica.housekeeping import CHECKPOINT_INTERVAL_S, Housekeeping  # noqa: F401 (re-exported)
from broker.replica.isr_maintenance import ISR_RETRY_MAX_S, ISR_RETRY_MIN_S, IsrMaintenance  # noqa: F401
from broker.replica.lease_fencing import LeaseFencing
from broker.replica.log_dir_moves import LogDirMoves
from broker.replica.partition import (Partition, TopicPartition, _now_ms, effective_min_isr, log_config_for,  # noqa: F401
                                      partition_dir_name)
from broker.replica.purgatory import Purgatory
from broker.replica.replica_state import LeaderReplicaState

log = logging.getLogger(__name__)

OPEN_AT_ONCE = 64  # partitions opened per turn of the event loop when many become ours at once


def _reassigned_away(topic: TopicRecord, index: int) -> bool:
    """Whether the topic's committed assignment has this partition, placed on other brokers (the
    caller checked this broker is not among its replicas): its log here may go."""
    return index < topic.partitions and topic.assignment is not None and index < len(topic.assignment)


class ReplicaManager(IsrMaintenance, LeaseFencing, Appends, Housekeeping):
    """The partitions this broker leads, following the metadata image.

    `apply_image` is Kafka's become-leader / stop-leader step: a partition whose leader in the
    image is this broker is opened (recovering its log if needed) with the image's leader epoch;
    one it no longer leads is flushed and closed (its data stays on disk, its offsets in the
    checkpoint files); one whose topic was deleted (or re-created under a new topic id) is removed.
    """

    def __init__(self, config: BrokerConfig, store: MetadataStore, fetch_purgatory: Purgatory,
                 produce_purgatory: Purgatory | None = None, delete_records_purgatory: Purgatory | None = None) -> None:
        self.config = config
        self.node_id = config.node_id
        self.store = store
        self.fetch_purgatory = fetch_purgatory
        self.produce_purgatory = produce_purgatory or Purgatory("produce")
        self.delete_records_purgatory = delete_records_purgatory or Purgatory("delete-records")
        self.max_lag_ms = config["replica.lag.time.max.ms"]
        self._follow_listeners: list = []
        self._isr_writes: set[asyncio.Task] = set()
        self.isr_writes_unknown = 0  # ISR writes whose outcome was unknown, written again
        # Whether this broker's registration may have lapsed (the store's Lease clock, wired by
        # server/broker.py): see writes_fenced.
        self.may_have_lapsed: Callable[[], bool] = lambda: False
        self.follower_silence_ms = max(1000, 2 * config["replica.fetch.wait.max.ms"])
        self.isr_shrinks = 0  # ISR changes this broker wrote as leader (metrics)
        self.isr_expands = 0
        self.partitions: dict[TopicPartition, Partition] = {}
        self.log_dirs = list(config.log_dirs)
        # Offsets of partitions not open here (closed or never opened), kept for the checkpoints.
        self._marks: dict[TopicPartition, tuple[int, int, int]] = {}
        # The topic records the last apply_image saw (to look only at what changed).
        self._applied: dict[str, TopicRecord] = {}
        self._applied_image = None  # the image those records are from
        self._listeners: list = []
        # Log dirs holding Kafka's clean-shutdown marker, while they are being loaded.
        self._clean_dirs: set[Path] = set()
        # Log dirs that failed (a write, roll, flush or checkpoint), with why: Kafka's offline
        # log dirs. Their partitions refuse writes until a restart; what is there stays readable.
        self.offline_dirs: dict[Path, str] = {}
        self._last_logged: dict[str, float] = {}
        self._placed: dict[Path, int] | None = None  # partition directories per log dir
        # Partitions this broker should lead but could not open, with why (topic creation rolls back).
        self.open_failures: dict[TopicPartition, str] = {}
        self._opening: set[TopicPartition] = set()  # queued for _open_in_chunks
        self._opening_tasks: set[asyncio.Task] = set()
        # Replicas moving to another log dir (AlterReplicaLogDirs, replica/log_dir_moves.py); the
        # cleaner leaves their logs alone meanwhile, as Kafka pauses cleaning of a moving partition.
        self.moves = LogDirMoves(self)
        self.cleaner = LogCleaner(self.log_dirs, lambda: {tp: p.log for tp, p in self.partitions.items()},
                                  paused=self.moves.moves.__contains__,
                                  settings=cleaner_settings.from_values(config["__raw__"]))
        self._checkpoint_lock = threading.Lock()
        self._checkpoint_seq = 0
        self._checkpoint_written = 0
        self.stray_logs_deleted = 0  # at start-up (replica/stray_logs.py)
        self.stray_logs_kept = 0  # `-stray` directories in the log dirs after start-up
        self.reassignment_bytes = reassignment_metrics.ReassignmentBytes()

    # -- start-up ----------------------------------------------------------------------------
    def load(self) -> None:
        """Read the checkpoint files, then open every partition the image says this broker leads."""
        marks: dict[str, dict[TopicPartition, int]] = {}
        for d in self.log_dirs:
            for name in (checkpoints.RECOVERY_POINT, checkpoints.LOG_START_OFFSET, checkpoints.HIGH_WATERMARK):
                try:
                    marks.setdefault(name, {}).update(checkpoints.read_checkpoint(d / name))
                except ValueError as e:
                    log.warning("ignoring unreadable checkpoint: %s", e)
        tps = set().union(*(m.keys() for m in marks.values())) if marks else set()
        for tp in tps:
            self._marks[tp] = (marks.get(checkpoints.RECOVERY_POINT, {}).get(tp, 0),
                               marks.get(checkpoints.LOG_START_OFFSET, {}).get(tp, 0),
                               marks.get(checkpoints.HIGH_WATERMARK, {}).get(tp, 0))
        self._clean_dirs = {d for d in self.log_dirs if (d / checkpoints.CLEAN_SHUTDOWN).exists()}
        self.moves.recover_interrupted_swaps()
        self.remove_stray_logs()
        started = time.monotonic()
        self.apply_image(self.store.image, chunked=False)  # before clients connect: all at once
        self.moves.resume()
        # From now on the logs change: a crash must not find the marker.
        for d in self._clean_dirs:
            (d / checkpoints.CLEAN_SHUTDOWN).unlink()
            fsync_directory(d)
        clean, self._clean_dirs = bool(self._clean_dirs), set()
        if self.partitions:
            log.info("opened %d partitions in %.2fs (%s)", len(self.partitions), time.monotonic() - started,
                     "after a clean shutdown" if clean else "recovering segments not known to be flushed")

    def remove_stray_logs(self) -> None:
        """Start-up, on the image just read in full from the store: partition directories the
        metadata no longer places here (replica/stray_logs.py) are set aside: deleted, or kept
        renamed `-stray` when their topic is not in the metadata at all."""
        earlier = stray_logs.left_over(self.log_dirs)
        strays = stray_logs.find(self.log_dirs, self.store.image, self.node_id)
        for s in strays:
            self._marks.pop((s.topic, s.partition), None)
        doomed = stray_logs.set_aside(strays)
        self.stray_logs_deleted = stray_logs.delete(earlier + doomed)
        self.stray_logs_kept = len(stray_logs.left_over(self.log_dirs, stray_logs.STRAY_SUFFIX))

    def on_leadership_change(self, callback) -> None:
        """callback(topic, partition, leading: bool) after a partition is opened or closed here."""
        self._listeners.append(callback)

    def _notify(self, topic: str, index: int, leading: bool) -> None:
        for cb in self._listeners:
            try:
                cb(topic, index, leading)
            except Exception:
                log.exception("leadership listener failed for %s-%d", topic, index)

    def _dir_for(self, topic: str, partition: int) -> Path:
        """Where a partition's log lives: where it already is, else the online log dir holding
        the fewest partitions (counted once at start, then kept up to date: no directory scans)."""
        name = partition_dir_name(topic, partition)
        for d in self.log_dirs:
            if (d / name).exists():
                return d / name
        online = [d for d in self.log_dirs if d not in self.offline_dirs]
        if not online:
            raise StorageError(f"cannot place {name}: every log directory is offline")
        preferred = self.moves.preferred.pop((topic, partition), None)  # AlterReplicaLogDirs asked before
        if preferred in online:
            if self._placed is not None:
                self._placed.setdefault(preferred, 0)
            return preferred / name
        if self._placed is None:
            self._placed = {d: sum(1 for e in d.iterdir() if e.is_dir()) if d.exists() else 0 for d in self.log_dirs}
        return min(online, key=lambda d: self._placed[d]) / name

    def _open_partition(self, topic: TopicRecord, p: int, state: PartitionState) -> Partition:
        directory = self._dir_for(topic.name, p)
        if not partition_metadata.matches(directory, topic.topic_id):
            # Left over from a deleted topic of the same name: never serve its records.
            log.warning("%s: removing data of an older topic of the same name", directory)
            shutil.rmtree(directory, ignore_errors=True)
            self._marks.pop((topic.name, p), None)
        recovery_point, log_start, high_watermark = self._marks.pop((topic.name, p), (0, 0, 0))
        if self._placed is not None and not directory.exists():
            self._placed[directory.parent] += 1
        log_ = Log.open(directory, topic.name, p, log_config_for(self.config, topic.configs),
                        recovery_point=recovery_point, log_start_offset=log_start, high_watermark=high_watermark,
                        clean_shutdown=directory.parent in self._clean_dirs)
        partition_metadata.write(directory, topic.topic_id)
        log_.on_background_failure = lambda e, d=directory.parent, name=f"{topic.name}-{p}": self.mark_offline(
            d, f"background flush of {name} failed: {e}", e)
        log_.high_watermark = min(log_.high_watermark, log_.log_end_offset)
        part = Partition(topic.name, p, topic.topic_id, log_, state.leader_epoch, state.leader)
        if state.leader == self.node_id:
            self._become_leader(part, state)
        self.partitions[(topic.name, p)] = part
        return part

    def _become_leader(self, part: Partition, state: PartitionState) -> None:
        """Kafka's makeLeader: the epoch starts at the log end; followers in the ISR count as
        caught up now (they get replica.lag.time.max.ms to fetch); the high watermark stays where
        it was until they report their log ends (a single replica: everything is committed)."""
        part.log.assign_epoch_start(state.leader_epoch)
        part.leader_epoch, part.leader_id = state.leader_epoch, self.node_id
        part.epoch_start_offset = part.log.log_end_offset
        part.replica_state = LeaderReplicaState.become_leader(
            self.node_id, tuple(state.replicas), frozenset(state.isr), part.log.high_watermark,
            part.log.log_end_offset, _now_ms(), self.max_lag_ms)
        self._advance_high_watermark(part)

    def _become_follower(self, part: Partition, state: PartitionState) -> None:
        """Kafka's makeFollower: stop answering as leader (waiting produces and fetches answer
        now); the replica fetcher truncates and fetches from the new leader."""
        part.replica_state = None
        part.epoch_start_offset = None
        part.leader_epoch, part.leader_id = state.leader_epoch, state.leader
        tp = (part.topic, part.index)
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    def log_moved(self, old: Path, new: Path) -> None:
        """A replica moved from log dir `old` to `new` (replica/log_dir_moves.py): the counts
        placement uses and the checkpoint files (each dir's list its own partitions) follow."""
        if self._placed is not None:
            self._placed[old] = self._placed.get(old, 1) - 1
            self._placed[new] = self._placed.get(new, 0) + 1
        self.write_checkpoints()

    def _close_partition(self, tp: TopicPartition) -> None:
        self.moves.cancel(tp)
        part = self.partitions.pop(tp)
        part.log.close()
        self._marks[tp] = (part.log.recovery_point, part.log.log_start_offset, part.log.high_watermark)
        # Long-polling fetches and acks=all produces of this partition answer now (NOT_LEADER_OR_FOLLOWER).
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    # -- leadership --------------------------------------------------------------------------
    def apply_image(self, image, chunked: bool = True) -> None:
        """Become leader of what the image says this broker leads; stop leading the rest.
        With `chunked`, many new partitions are opened a chunk per turn of the event loop.

        Only topics whose record changed since the last image are looked at (leadership lives in
        the topic record), plus those with partitions that failed to open, which are retried."""
        changed_names = None if self._applied_image is None else image.changed_since(self._applied_image)
        if image is self._applied_image:
            changed_names = frozenset()
        self._applied_image = image
        spans: dict[str, int] | None = None  # with changed_names: the partition indexes to look at
        if changed_names is None:  # not made from the last image (start-up, a re-list): compare all
            touched = {name for name, t in image.topics.items() if self._applied.get(name) is not t}
            touched |= {name for name in self._applied if name not in image.topics}
            self._applied = dict(image.topics)
        else:  # a few topics changed: the cost of applying them does not grow with the topic count
            touched, spans = set(changed_names), {}
            for name in changed_names:
                old, new = self._applied.get(name), image.topics.get(name)
                spans[name] = max(old.partitions if old else 0, new.partitions if new else 0)
                if new is None:
                    self._applied.pop(name, None)
                else:
                    self._applied[name] = new
        for tp in self.open_failures:
            if spans is not None and tp[0] not in spans:
                spans[tp[0]] = image.topics[tp[0]].partitions if tp[0] in image.topics else tp[1] + 1
            touched.add(tp[0])
        if not touched:
            return
        held: dict[TopicPartition, tuple[TopicRecord, PartitionState]] = {}  # led or followed here
        for name in touched:
            topic = image.topics.get(name)
            for i, state in enumerate(topic.assignment or () if topic is not None else ()):
                if i < topic.partitions and (state.leader == self.node_id or self.node_id in state.replicas):
                    held[(topic.name, i)] = (topic, state)
        changed = False
        follow_changed = False
        if spans is None:
            candidates = [(tp, part) for tp, part in self.partitions.items() if tp[0] in touched]
        else:
            candidates = [((n, i), self.partitions[(n, i)]) for n, k in spans.items() for i in range(k)
                          if (n, i) in self.partitions]
        for tp, part in candidates:
            topic = image.topics.get(tp[0])
            if topic is None or topic.topic_id != part.topic_id:
                was_leader = part.is_leader
                self._delete_partition(tp)
                if was_leader:
                    self._notify(tp[0], tp[1], False)
                changed = follow_changed = True
            elif tp not in held:
                was_leader = part.is_leader
                if _reassigned_away(topic, tp[1]):
                    # A committed assignment without this broker (a reassignment finished or was
                    # cancelled, KIP-455): Kafka's StopReplica with deletion.
                    log.info("%s-%d: no longer a replica here (reassigned): deleting its log", tp[0], tp[1])
                    self._delete_partition(tp)
                else:
                    log.info("%s-%d: no longer a replica here (epoch %d)", tp[0], tp[1], part.leader_epoch)
                    self._close_partition(tp)
                if was_leader:
                    self._notify(tp[0], tp[1], False)
                changed = follow_changed = True
        to_open = []
        configs: dict[str, LogConfig] = {}  # per topic, computed once
        for tp, (topic, state) in held.items():
            part = self.partitions.get(tp)
            if part is None:
                if tp not in self._opening:
                    to_open.append((tp, topic, state))
                continue
            leads = state.leader == self.node_id
            if leads and (not part.is_leader or state.leader_epoch != part.leader_epoch):
                log.info("%s-%d: leader at epoch %d", tp[0], tp[1], state.leader_epoch)
                was_leader = part.is_leader
                try:
                    self._become_leader(part, state)
                except LogError as e:
                    log.error("%s-%d: cannot record leader epoch %d: %s", tp[0], tp[1], state.leader_epoch, e)
                follow_changed = True
                if not was_leader:
                    self._notify(tp[0], tp[1], True)
            elif leads:
                if tuple(state.replicas) != part.replica_state.replicas:
                    self._replicas_from_image(part, state)
                self._isr_from_image(part, state)
            elif part.is_leader or (state.leader_epoch, state.leader) != (part.leader_epoch, part.leader_id):
                log.info("%s-%d: follower of %d at epoch %d", tp[0], tp[1], state.leader, state.leader_epoch)
                was_leader = part.is_leader
                self._become_follower(part, state)
                follow_changed = True
                if was_leader:
                    self._notify(tp[0], tp[1], False)
            cfg = configs.get(topic.name) or configs.setdefault(topic.name, log_config_for(self.config, topic.configs))
            if part.log.config != cfg:
                part.log.config = cfg
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if chunked and loop is not None and len(to_open) > OPEN_AT_ONCE:
            # Thousands of new partitions: open them in chunks, letting the event loop serve
            # other clients in between (they answer NOT_LEADER_OR_FOLLOWER until open).
            later, to_open = to_open[OPEN_AT_ONCE:], to_open[:OPEN_AT_ONCE]
            self._opening.update(tp for tp, _, _ in later)
            task = loop.create_task(self._open_in_chunks(later), name="open-partitions")
            self._opening_tasks.add(task)
            task.add_done_callback(self._opening_tasks.discard)
        opened = self._open_partitions(to_open)
        for tp in [tp for tp in self.open_failures if tp[0] in touched and tp not in held]:
            del self.open_failures[tp]
        if changed:  # a partition closed or deleted; one just opened has nothing to checkpoint yet
            self.write_checkpoints()
        if follow_changed or opened:
            self._follow_changed()

    # -- followers ---------------------------------------------------------------------------
    def on_follow_change(self, callback) -> None:
        """callback({(topic, partition): (leader id, leader epoch)}) whenever what this broker
        follows changes: the replica fetchers' input."""
        self._follow_listeners.append(callback)

    def following(self) -> dict[TopicPartition, tuple[int, int]]:
        return {tp: (p.leader_id, p.leader_epoch) for tp, p in self.partitions.items() if not p.is_leader}

    def _follow_changed(self) -> None:
        following = self.following()
        for cb in self._follow_listeners:
            try:
                cb(following)
            except Exception:
                log.exception("follower listener failed")

    def follower(self, topic: str, partition: int, leader_epoch: int) -> Partition | None:
        """The partition if this broker still follows it at `leader_epoch` (the fetcher checks
        before it truncates or appends: the image may have moved on while it waited)."""
        part = self.partitions.get((topic, partition))
        if part is None or part.is_leader or part.leader_epoch != leader_epoch:
            return None
        return part

    def append_as_follower(self, part: Partition, payload: bytes) -> None:
        d = part.log.directory.parent
        if d in self.offline_dirs:
            raise LogDirOffline(f"{part.topic}-{part.index}: log directory {d} is offline ({self.offline_dirs[d]})")
        try:
            part.log.append_as_follower(payload)
        except StorageError as e:
            self.mark_offline(d, str(e), e)
            raise
        reassignment_metrics.count_in(self.reassignment_bytes, self.store.image, part.topic, part.index,
                                      self.node_id, len(payload))


    def _open_partitions(self, to_open) -> bool:
        """Open [(tp, topic, partition state)]; failures are logged once per topic and remembered in
        open_failures; after running out of descriptors the rest is not even tried."""
        failed: dict[str, list] = {}  # topic -> [count, first error]
        out_of_descriptors = False
        opened = False
        for tp, topic, state in to_open:
            if out_of_descriptors:
                failed.setdefault(tp[0], [0, "no file descriptors left"])[0] += 1
                self.open_failures[tp] = "no file descriptors left"
                continue
            try:
                self._open_partition(topic, tp[1], state)
            except (OSError, LogError) as e:
                failed.setdefault(tp[0], [0, str(e)])[0] += 1
                self.open_failures[tp] = str(e)
                out_of_descriptors = isinstance(e, OSError) and e.errno in (errno.EMFILE, errno.ENFILE)
                continue
            self.open_failures.pop(tp, None)
            if state.leader == self.node_id:
                log.info("%s-%d: leader at epoch %d", tp[0], tp[1], state.leader_epoch)
                self._notify(tp[0], tp[1], True)
            else:
                log.info("%s-%d: follower of %d at epoch %d", tp[0], tp[1], state.leader, state.leader_epoch)
            opened = True
        for name, (count, first) in failed.items():
            # One line per topic, not per partition: thousands of partitions must not flood the log.
            log.error("%s: cannot open the logs of %d partitions to lead them: %s", name, count, first)
        return opened

    async def _open_in_chunks(self, pending) -> None:
        try:
            for i in range(0, len(pending), OPEN_AT_ONCE):
                await asyncio.sleep(0)
                chunk = []
                for tp, _, _ in pending[i:i + OPEN_AT_ONCE]:
                    self._opening.discard(tp)
                    topic = self.store.image.topics.get(tp[0])  # still ours, in the current image?
                    assignment = (topic.assignment or ()) if topic is not None else ()
                    if (tp in self.partitions or tp[1] >= len(assignment) or tp[1] >= topic.partitions
                            or (assignment[tp[1]].leader != self.node_id
                                and self.node_id not in assignment[tp[1]].replicas)):
                        continue
                    chunk.append((tp, topic, assignment[tp[1]]))
                self._open_partitions(chunk)
        finally:
            for tp, _, _ in pending:
                self._opening.discard(tp)
            self.write_checkpoints()
            self._follow_changed()

    async def wait_opened(self) -> None:
        """Wait until partitions being opened in the background are open (or failed)."""
        while self._opening_tasks:
            await asyncio.gather(*list(self._opening_tasks), return_exceptions=True)

    def _delete_partition(self, tp: TopicPartition) -> None:
        self.moves.cancel(tp)
        part = self.partitions.pop(tp)
        directory = part.log.directory
        part.log.close()
        shutil.rmtree(directory, ignore_errors=True)
        if self._placed is not None and not directory.exists():
            self._placed[directory.parent] -= 1
        self._marks.pop(tp, None)
        self.cleaner.forget(tp)
        self.fetch_purgatory.check_and_complete(tp)
        self.produce_purgatory.check_and_complete(tp)
        self.delete_records_purgatory.check_and_complete(tp)

    def leader_or_error(self, topic: str, partition: int) -> tuple[Partition | None, ErrorCode, object]:
        """The partition if this broker leads it, else why not: (None, error, the image's
        PartitionState or None). Led elsewhere -> NOT_LEADER_OR_FOLLOWER (the state names the
        leader), no live leader -> LEADER_NOT_AVAILABLE, unknown -> UNKNOWN_TOPIC_OR_PARTITION."""
        record = self.store.image.topics.get(topic)
        if record is None or not 0 <= partition < record.partitions:
            return None, ErrorCode.unknown_topic_or_partition, None
        assignment = record.assignment or ()
        if partition >= len(assignment):
            return None, ErrorCode.leader_not_available, None
        state = assignment[partition]
        if state.leader == NO_LEADER:
            return None, ErrorCode.leader_not_available, state
        part = self.partitions.get((topic, partition))
        if state.leader != self.node_id or part is None or not part.is_leader or part.topic_id != record.topic_id:
            return None, ErrorCode.not_leader_or_follower, state
        return part, ErrorCode.none, state

    # -- topic lifecycle (single-broker paths kept for callers that open logs directly) ------
    def create_logs(self, topic: TopicRecord) -> None:
        self.apply_image(self.store.image)

    def delete_logs(self, topic: str) -> None:
        for tp in [tp for tp in self.partitions if tp[0] == topic]:
            self._delete_partition(tp)
        self.write_checkpoints()

    def reconfigure(self, topic: TopicRecord) -> None:
        cfg = log_config_for(self.config, topic.configs)
        for (name, _), part in self.partitions.items():
            if name == topic.name:
                part.log.config = cfg

    # -- data path ---------------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> Partition | None:
        """The partition if this broker leads it (followers' logs are the replica fetcher's)."""
        part = self.partitions.get((topic, partition))
        return part if part is not None and part.is_leader else None


    def live_brokers_changed(self) -> None:
        """Broker registrations came or went: the low watermark counts live replicas only, so
        waiting DeleteRecords look again."""
        self.delete_records_purgatory.check_all()

    def close(self) -> list[str]:
        """Clean shutdown: flush every log, snapshot producer state, write checkpoints, and mark
        each log directory whose logs all made it to disk as cleanly shut down. Does all it can
        even when a directory fails (a full disk); returns what could not be done."""
        for task in list(self._opening_tasks):  # partitions still queued stay closed
            task.cancel()
        self.cleaner.close()
        self.moves.close()
        for part in self.partitions.values():
            if not part.log.close():
                self.mark_offline(part.log.directory.parent, f"flush of {part.topic}-{part.index} on shutdown failed")
        self.write_checkpoints()
        for d in self.log_dirs:
            if d in self.offline_dirs:
                continue
            try:
                (d / checkpoints.CLEAN_SHUTDOWN).touch()
                fsync_directory(d)
            except OSError as e:
                self.mark_offline(d, f"writing the clean-shutdown marker failed: {e}", e)
        return [f"log directory {d}: {why}; its logs are recovered at the next start"
                for d, why in self.offline_dirs.items()]
