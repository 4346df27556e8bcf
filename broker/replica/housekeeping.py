"""Housekeeping of the partitions held here, on Kafka's intervals: retention, time-based flushes,
producer-id expiration and the checkpoint files; a log directory that fails is taken offline
(Kafka's LogDirFailureChannel) and its partitions refuse writes until a restart."""

from __future__ import annotations

import asyncio
import errno
import logging
import time
from pathlib import Path

from broker.log import checkpoints
from broker.log.durable import STORAGE_IO
from broker.log.log import LogError
from broker.replica.partition import Partition, TopicPartition, partition_dir_name

log = logging.getLogger(__name__)

CHECKPOINT_INTERVAL_S = 5.0  # Kafka writes high-watermark checkpoints every 5 s


def _out_of_descriptors(exc: BaseException | None) -> bool:
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return True
        exc = exc.__cause__
    return False


class Housekeeping:
    """Part of ReplicaManager (replica/replica_manager.py), whose state it uses."""

    def mark_offline(self, d: Path, reason: str, exc: BaseException | None = None) -> None:
        """A log directory failed: say so once, and refuse writes to its partitions from now on.
        Running out of file descriptors is the process's trouble, not the disk's: that is logged
        (at most once a minute) and the work is tried again later instead."""
        if _out_of_descriptors(exc):
            now = time.monotonic()
            if now - self._last_logged.get("EMFILE", -1e9) >= 60:
                self._last_logged["EMFILE"] = now
                log.error("out of file descriptors (%s); will retry. Raise the open-file limit or hold fewer "
                          "partitions/connections (repeats logged once a minute)", reason)
            return
        if d in self.offline_dirs:
            return
        self.offline_dirs[d] = reason
        log.error("log directory %s is offline: %s. Its partitions refuse writes with KAFKA_STORAGE_ERROR "
                  "until the broker restarts; what they hold stays readable", d, reason)

    def _each_online_partition(self, what: str, job) -> int:
        """Run `job(partition)` on every partition of an online dir; a storage failure takes that
        partition's dir offline instead of stopping the others. Returns the sum of the results."""
        total = 0
        for part in list(self.partitions.values()):
            d = part.log.directory.parent
            if d in self.offline_dirs:
                continue
            try:
                total += job(part) or 0
            except (OSError, LogError) as e:
                self.mark_offline(d, f"{what} of {part.topic}-{part.index} failed: {e}", e)
        return total

    def _checkpoint_job(self):
        """Collect every partition's offsets now (on the event loop) and return a callable that
        writes them, one set of three files per online log dir, from any thread. Writes are
        serialised and a job older than one already written is dropped, so files never go back."""
        self._checkpoint_seq += 1
        seq = self._checkpoint_seq
        by_dir: dict[Path, dict[str, dict[TopicPartition, int]]] = {d: {} for d in self.log_dirs}
        for tp, part in self.partitions.items():
            d = part.log.directory.parent
            marks = by_dir.setdefault(d, {})
            marks.setdefault(checkpoints.RECOVERY_POINT, {})[tp] = part.log.recovery_point
            marks.setdefault(checkpoints.LOG_START_OFFSET, {})[tp] = part.log.log_start_offset
            marks.setdefault(checkpoints.HIGH_WATERMARK, {})[tp] = part.log.high_watermark
        for tp, (recovery_point, log_start, high_watermark) in self._marks.items():
            if tp in self.partitions:
                continue
            found = [d for d in self.log_dirs if (d / partition_dir_name(*tp)).exists()]
            if not found:
                continue
            marks = by_dir.setdefault(found[0], {})
            marks.setdefault(checkpoints.RECOVERY_POINT, {})[tp] = recovery_point
            marks.setdefault(checkpoints.LOG_START_OFFSET, {})[tp] = log_start
            marks.setdefault(checkpoints.HIGH_WATERMARK, {})[tp] = high_watermark
        by_dir = {d: marks for d, marks in by_dir.items() if d not in self.offline_dirs}

        def job() -> list[tuple[Path, OSError]]:
            failures = []
            with self._checkpoint_lock:
                if seq < self._checkpoint_written:
                    return failures
                self._checkpoint_written = seq
                for d, marks in by_dir.items():
                    try:
                        d.mkdir(parents=True, exist_ok=True)
                        for name in (checkpoints.RECOVERY_POINT, checkpoints.LOG_START_OFFSET, checkpoints.HIGH_WATERMARK):
                            checkpoints.write_checkpoint(d / name, marks.get(name, {}))
                    except OSError as e:
                        failures.append((d, e))
            return failures

        return job

    def _checkpoints_failed(self, failures: list[tuple[Path, OSError]]) -> None:
        for d, e in failures:
            self.mark_offline(d, f"writing checkpoints failed: {e}", e)

    def write_checkpoints(self) -> None:
        """Write the checkpoint files here (start-up, shutdown, topic changes)."""
        self._checkpoints_failed(self._checkpoint_job()())

    async def write_checkpoints_async(self) -> None:
        """Write the checkpoint files in the storage threads (the periodic checkpoint)."""
        job = self._checkpoint_job()
        self._checkpoints_failed(await asyncio.get_running_loop().run_in_executor(STORAGE_IO, job))

    def enforce_retention(self) -> int:
        """Segments wholly below the log start offset (DeleteRecords, a leader's log start a
        follower took), whatever the policy; then retention.ms/bytes for policies with `delete`."""
        def job(part: Partition) -> int:
            deleted = part.log.delete_segments_below_start()
            if "delete" in part.log.config.cleanup_policy.split(","):
                deleted += part.log.enforce_retention()
            return deleted
        return self._each_online_partition("retention", job)

    def remove_expired_producers(self) -> int:
        """Kafka's periodic producer expiration check, over every partition held here."""
        now_ms = int(time.time() * 1000)
        return self._each_online_partition("producer expiration", lambda part: part.log.remove_expired_producers(now_ms))

    async def flush_due(self) -> None:
        """Time-based flushes (flush.ms), in the storage threads."""
        due = [p for p in self.partitions.values()
               if p.log.directory.parent not in self.offline_dirs and p.log.flush_is_due()]
        results = await asyncio.gather(*(p.log.flush_async() for p in due), return_exceptions=True)
        for part, r in zip(due, results):
            if isinstance(r, OSError):
                self.mark_offline(part.log.directory.parent, f"a time-based flush of {part.topic}-{part.index} failed: {r}", r)
            elif isinstance(r, BaseException):
                raise r

    def _log_failure(self, step: str) -> None:
        """Log an unexpected exception of a background step, with its traceback at most once a minute."""
        now = time.monotonic()
        if now - self._last_logged.get(step, -1e9) >= 60:
            self._last_logged[step] = now
            log.exception("housekeeping: %s failed; going on (repeats of this are logged once a minute)", step)

    async def housekeeping_loop(self) -> None:
        """Retention, time-based flush, producer expiration and checkpoints, on Kafka's
        intervals. A step that fails is logged and the loop goes on: a failed log dir is taken
        offline (mark_offline), anything else is retried on the next round."""
        retention_every = self.config["log.retention.check.interval.ms"] / 1000
        expire_every = self.config["producer.id.expiration.check.interval.ms"] / 1000
        due = {"retention": time.monotonic() + retention_every, "checkpoint": time.monotonic() + CHECKPOINT_INTERVAL_S,
               "producer expiration": time.monotonic() + expire_every}
        while True:
            await asyncio.sleep(1.0)
            for step, every, job in (
                ("time-based flush", 0.0, self.flush_due),
                ("retention", retention_every, self._retention_step),
                ("producer expiration", expire_every, self._expiry_step),
                ("checkpoint", CHECKPOINT_INTERVAL_S, self.write_checkpoints_async),
            ):
                if time.monotonic() < due.get(step, 0.0):
                    continue
                try:
                    done = job()
                    if asyncio.iscoroutine(done):
                        await done
                except Exception:
                    self._log_failure(step)
                if every:
                    due[step] = time.monotonic() + every

    def _retention_step(self) -> None:
        n = self.enforce_retention()
        if n:
            log.info("retention deleted %d segments", n)

    def _expiry_step(self) -> None:
        n = self.remove_expired_producers()
        if n:
            log.info("expired %d idle producer ids", n)
