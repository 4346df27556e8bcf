"""Moving a replica between this broker's log dirs (AlterReplicaLogDirs, KIP-113), as Kafka's
ReplicaManager.alterReplicaLogDirs and its ReplicaAlterLogDirsThread do.

A move builds a future log (`<topic>-<n>.<id>-future` in the target dir, `log/future_log.py`)
from the current one while the current one keeps serving, one bounded copy step per turn of the
event loop. Once the future log holds the current log's end, the swap runs in that same turn,
so no append or truncation can come between the check and the swap (the event loop is the
partition's lock): the current dir is renamed `<topic>-<n>.<id>-delete`, the future dir takes
the partition's name, the log is reopened there and the partition serves from it. The old log's
files are closed and deleted once flushes that were waiting on them are done.

A restart comes back consistent: the current dir is renamed away *before* the future dir takes
its name, so a partition never has two current dirs. At start-up a `-future` dir whose partition
has no current dir was caught up (the swap had begun) and becomes the current dir; one beside a
current dir is resumed if the partition is still held here (Kafka resumes its future logs),
otherwise deleted; `-delete` dirs are deleted (replica/stray_logs.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol

from kio.schema.errors import ErrorCode

from broker.log.durable import STORAGE_IO, fsync_directory
from broker.log.future_log import COPY_BYTES, FutureLogCopier, delete_dir_name, find_future_dirs, future_dir_name
from broker.log.log import Log, LogError
from broker.replica import partition_metadata

if TYPE_CHECKING:
    from broker.metadata.store import MetadataStore

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class Partition(Protocol):
    """What a move reads of a replica (replica/replica_manager.py's Partition); its `log` is swapped."""

    topic: str
    index: int
    topic_id: Any
    log: Log


class Replicas(Protocol):
    """What moves use of the replica manager (passed in, not imported: it holds the moves)."""

    log_dirs: list[Path]
    offline_dirs: dict[Path, str]
    partitions: Mapping[TopicPartition, Partition]
    store: "MetadataStore"

    def mark_offline(self, d: Path, reason: str, exc: BaseException | None = None) -> None: ...

    def log_moved(self, old: Path, new: Path) -> None: ...
STEP_BYTES = COPY_BYTES  # copied per turn of the event loop
IDLE_S = 0.01  # between steps when the current log has nothing new (never while copying a backlog)
MAX_NAME = 255  # a directory name's limit (Kafka refuses longer future dir names: INVALID_TOPIC_EXCEPTION)


@dataclass
class Move:
    tp: TopicPartition
    dest: Path  # the log dir the replica moves to
    copier: FutureLogCopier
    task: asyncio.Task | None = None

    @property
    def future(self) -> Log:
        return self.copier.future


class LogDirMoves:
    """The moves under way on this broker, and the log dir asked for partitions not here yet."""

    def __init__(self, replicas: Replicas) -> None:
        self.replicas = replicas
        self.moves: dict[TopicPartition, Move] = {}
        # Kafka's preferredLogDirs: where a partition not held here yet is to be created.
        self.preferred: dict[TopicPartition, Path] = {}
        self.completed = 0
        self._retiring: set[asyncio.Task] = set()

    # -- AlterReplicaLogDirs -------------------------------------------------------------------
    def alter(self, topic: str, partition: int, path: str) -> ErrorCode:
        """Move one replica to the log dir `path` (absolute, as Kafka compares it); the error
        Kafka's ReplicaManager.alterReplicaLogDirs gives."""
        rm = self.replicas
        if len(future_dir_name(topic, partition)) > MAX_NAME:
            return ErrorCode.invalid_topic_exception
        dest = next((d for d in rm.log_dirs if str(Path(d).absolute()) == path), None)
        if dest is None:
            return ErrorCode.log_dir_not_found
        if dest in rm.offline_dirs:
            return ErrorCode.kafka_storage_error
        tp = (topic, partition)
        part = rm.partitions.get(tp)
        if part is not None and part.log.directory.parent in rm.offline_dirs:
            return ErrorCode.kafka_storage_error
        move = self.moves.get(tp)
        if move is not None and move.dest != dest:  # another target now: this move stops
            self.cancel(tp)
        if part is None:
            record = rm.store.image.topics.get(topic)
            if record is None or not 0 <= partition < record.partitions:
                return ErrorCode.unknown_topic_or_partition
            self.preferred[tp] = dest  # created there when it is assigned here
            return ErrorCode.replica_not_available
        if part.log.directory.parent == dest or tp in self.moves:
            return ErrorCode.none
        if rm.offline_dirs:
            # As Kafka: no future log while a dir is offline (it could already hold one).
            return ErrorCode.kafka_storage_error
        try:
            self._start(part, dest)
        except (OSError, LogError) as e:
            rm.mark_offline(dest, f"creating the future log of {topic}-{partition} failed: {e}", e)
            return ErrorCode.kafka_storage_error
        return ErrorCode.none

    def _start(self, part: Partition, dest: Path, directory: Path | None = None) -> Move:
        tp = (part.topic, part.index)
        fresh = directory is None
        directory = directory or dest / future_dir_name(part.topic, part.index)
        future = Log.open(directory, part.topic, part.index, part.log.config,
                          log_start_offset=part.log.log_start_offset)
        partition_metadata.write(directory, part.topic_id)
        move = Move(tp, dest, FutureLogCopier(future))
        part.log.truncation_listeners.append(move.copier.source_truncated)
        self.moves[tp] = move
        move.task = asyncio.get_running_loop().create_task(self._run(move), name=f"log-dir-move-{tp[0]}-{tp[1]}")
        log.info("%s-%d: %s moving from %s to %s (future log %s)", tp[0], tp[1], "started" if fresh else "resumed",
                 part.log.directory.parent, dest, directory.name)
        return move

    async def _run(self, move: Move) -> None:
        rm = self.replicas
        tp = move.tp
        try:
            while True:
                part = rm.partitions.get(tp)
                if part is None:
                    self.cancel(tp)
                    return
                source_dir = part.log.directory.parent
                if source_dir in rm.offline_dirs or move.dest in rm.offline_dirs:
                    log.warning("%s-%d: move to %s stopped: a log dir is offline", tp[0], tp[1], move.dest)
                    self._stop(move, delete=False)
                    return
                copied = move.copier.step(part.log, STEP_BYTES)
                if move.copier.caught_up(part.log):
                    self._swap(part, move)
                    return
                await asyncio.sleep(0 if copied else IDLE_S)
        except asyncio.CancelledError:
            raise
        except (OSError, LogError) as e:
            log.error("%s-%d: moving to %s failed: %s", tp[0], tp[1], move.dest, e)
            self._stop(move, delete=False)
            rm.mark_offline(move.dest, f"the future log of {tp[0]}-{tp[1]} failed: {e}", e)

    # -- the swap ------------------------------------------------------------------------------
    def _swap(self, part: Partition, move: Move) -> None:
        """The future log takes the current one's place (synchronous: nothing runs in between)."""
        rm = self.replicas
        tp = move.tp
        source = part.log
        source.truncation_listeners.remove(move.copier.source_truncated)
        # Its dir is renamed away: a late background snapshot of it failing says nothing of the disk.
        source.on_background_failure = lambda e, name=f"{tp[0]}-{tp[1]}": log.info(
            "%s: background work on the replaced log failed: %s", name, e)
        move.copier.finish(source)
        future_dir = move.future.directory
        old_dir = source.directory
        doomed = old_dir.parent / delete_dir_name(*tp)
        final = move.dest / old_dir.name
        os.rename(old_dir, doomed)  # first: from here a restart promotes the future dir
        fsync_directory(old_dir.parent)
        os.rename(future_dir, final)
        fsync_directory(move.dest)
        new = Log.open(final, part.topic, part.index, source.config, recovery_point=move.future.log_end_offset,
                       log_start_offset=move.future.log_start_offset, high_watermark=source.high_watermark,
                       clean_shutdown=True)
        new.on_background_failure = lambda e, d=move.dest, name=f"{tp[0]}-{tp[1]}": rm.mark_offline(
            d, f"background flush of {name} failed: {e}", e)
        part.log = new
        del self.moves[tp]
        self.completed += 1
        rm.log_moved(old_dir.parent, move.dest)
        log.info("%s-%d: moved from %s to %s at offset %d", tp[0], tp[1], old_dir.parent, move.dest,
                 new.log_end_offset)
        task = asyncio.get_running_loop().create_task(self._retire(source, doomed), name="log-dir-move-retire")
        self._retiring.add(task)
        task.add_done_callback(self._retiring.discard)

    @staticmethod
    async def _retire(old: Log, doomed: Path) -> None:
        """Close and delete the replaced log once flushes that were waiting on it are done (a
        produce whose append went there awaits its fsync); fetches still sending its files keep
        their descriptors."""
        async with old._flush_lock:
            pass
        for seg in old.segments:
            seg.close()
        await asyncio.get_running_loop().run_in_executor(STORAGE_IO, shutil.rmtree, doomed, True)

    # -- stopping --------------------------------------------------------------------------------
    def cancel(self, tp: TopicPartition) -> None:
        """Stop a move and delete its future log (another target, the partition went, or a move
        back to the current dir)."""
        move = self.moves.get(tp)
        if move is not None:
            self._stop(move, delete=True)

    def _stop(self, move: Move, delete: bool) -> None:
        self.moves.pop(move.tp, None)
        if move.task is not None and move.task is not asyncio.current_task():
            move.task.cancel()
        part = self.replicas.partitions.get(move.tp)
        if part is not None and move.copier.source_truncated in part.log.truncation_listeners:
            part.log.truncation_listeners.remove(move.copier.source_truncated)
        if delete:
            log.info("%s-%d: move to %s cancelled; future log deleted", move.tp[0], move.tp[1], move.dest)
            for seg in move.future.segments:
                seg.close()
            shutil.rmtree(move.future.directory, ignore_errors=True)
        else:
            move.future.close()

    def close(self) -> None:
        """Shutdown: futures are flushed and closed, to be resumed at the next start."""
        for move in list(self.moves.values()):
            self._stop(move, delete=False)

    # -- start-up ------------------------------------------------------------------------------
    def recover_interrupted_swaps(self) -> None:
        """Before any partition opens: a future dir whose partition has no current dir was caught
        up when a swap began (the current dir is renamed first); it becomes the current dir."""
        dirs = self.replicas.log_dirs
        for topic, index, path in find_future_dirs(dirs):
            name = f"{topic}-{index}"
            if any((d / name).exists() for d in dirs):
                continue
            os.rename(path, path.parent / name)
            fsync_directory(path.parent)
            log.warning("%s: a move was interrupted during its swap; the moved log in %s is now current",
                        name, path.parent)

    def resume(self) -> None:
        """After the partitions are open: moves a restart interrupted go on; future logs of
        partitions no longer here are deleted."""
        rm = self.replicas
        for topic, index, path in find_future_dirs(rm.log_dirs):
            part = rm.partitions.get((topic, index))
            if (part is None or part.log.directory.parent == path.parent or (topic, index) in self.moves
                    or not partition_metadata.matches(path, part.topic_id)):
                log.info("%s: future log of a partition not moving here; deleting it", path)
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                self._start(part, path.parent, directory=path)
            except (OSError, LogError) as e:
                rm.mark_offline(path.parent, f"resuming the move of {topic}-{index} failed: {e}", e)

    # -- reporting -------------------------------------------------------------------------------
    def futures(self) -> dict[TopicPartition, Log]:
        """DescribeLogDirs' future replicas (isFuture=true)."""
        return {tp: m.future for tp, m in self.moves.items()}
