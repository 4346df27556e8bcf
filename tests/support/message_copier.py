"""Kafka's TransactionalMessageCopier (kafka-tools) as a child process, driven the way Kafka's
system test drives it: one copier per input partition, bounced cleanly (SIGTERM: its shutdown hook
closes the clients) or hard (kill -9), its JSON status lines read for progress.

The copier reads its partition with read_committed from the group's committed offset up to the end
offset it saw at launch; each poll becomes one transaction (the records copied to the same
partition of the output topic, the consumer's position sent with sendOffsetsToTransaction), about a
third of them aborted with --enable-random-aborts. It prints `{"transactionalId", "stage":
"ProcessLoop", "totalProcessed", "remaining", ...}` before each poll (`remaining` counts input records not yet committed, so a
restart starts from what is left) and exits 0 once nothing remains.

    c = Copier(workdir, bootstrap, transactional_id="copier-0", ...); c.start(); c.restart(clean=False)
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any

from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv.brokers.broker_process import tail


class Copier:
    """One copier for one input partition; `start`, `stop(clean)`, `restart(clean)` manage the
    process (a new one per start), `unexpected_exit()` says whether it died on its own."""

    def __init__(self, workdir: Path, bootstrap: str, *, transactional_id: str, group: str, input_topic: str,
                 partition: int, output_topic: str, transaction_size: int, transaction_timeout_ms: int,
                 use_group_metadata: bool, random_aborts: bool = True) -> None:
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.transactional_id = transactional_id
        self.partition = partition
        self.args = ["--broker-list", bootstrap, "--transactional-id", transactional_id, "--consumer-group", group,
                     "--input-topic", input_topic, "--input-partition", str(partition), "--output-topic", output_topic,
                     "--transaction-size", str(transaction_size), "--transaction-timeout", str(transaction_timeout_ms),
                     *(["--use-group-metadata"] if use_group_metadata else []),
                     *(["--enable-random-aborts"] if random_aborts else [])]
        self.proc: subprocess.Popen[str] | None = None
        self.starts = 0
        self.stopped_by_us = False
        self.last: dict[str, Any] | None = None  # the current process's last status line
        self._reader: threading.Thread | None = None

    # -- the process ---------------------------------------------------------------------------
    @property
    def stdout_path(self) -> Path:
        return self.workdir / f"{self.transactional_id}.stdout"

    @property
    def stderr_path(self) -> Path:
        return self.workdir / f"{self.transactional_id}.stderr"

    def start(self) -> "Copier":
        if self.running():
            raise RuntimeError(f"{self.transactional_id} already running")
        self.starts += 1
        self.last = None
        self.stopped_by_us = False
        with open(self.stderr_path, "a") as err:
            err.write(f"==== start #{self.starts}\n")
            err.flush()
            self.proc = subprocess.Popen(kafka_tools.command("TransactionalMessageCopier", *self.args),
                                         stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL, text=True,
                                         start_new_session=True)
        self._reader = threading.Thread(target=self._read, args=(self.proc,), daemon=True,
                                        name=f"copier-{self.transactional_id}")
        self._reader.start()
        return self

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        with open(self.stdout_path, "a") as log:
            log.write(f"==== start #{self.starts}\n")
            for line in proc.stdout:
                log.write(line)
                if not line.startswith("{"):
                    continue
                try:
                    status = json.loads(line)
                except ValueError:
                    continue
                # kafka-tools 4.1: {"transactionalId", "stage": "ProcessLoop"|"ShutdownComplete",
                # "totalProcessed", "consumed", "remaining", "time"} (older tools named the id
                # "progress"/"shutdown_complete"): any line with the counts will do.
                if proc is self.proc and isinstance(status, dict) and {"totalProcessed", "remaining"} <= status.keys():
                    self.last = status

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, clean: bool, timeout: float = 90.0) -> int | None:
        """SIGTERM and wait (clean), or SIGKILL (hard); the exit code."""
        if self.proc is None:
            return None
        self.stopped_by_us = True
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM if clean else signal.SIGKILL)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
                raise AssertionError(f"{self.transactional_id} did not exit within {timeout}s of SIGTERM;"
                                     f" {self.logs()}") from None
        if self._reader is not None:
            self._reader.join(10)
        return self.proc.returncode

    def restart(self, clean: bool) -> "Copier":
        self.stop(clean)
        return self.start()

    def close(self) -> None:
        if self.running():
            self.stop(clean=False)

    # -- what it says --------------------------------------------------------------------------
    def done(self) -> bool:
        """Exited 0 on its own: it copied everything up to the input's end."""
        return self.proc is not None and self.proc.poll() == 0 and not self.stopped_by_us

    def unexpected_exit(self) -> int | None:
        """The exit code of a process that died without being stopped or finishing, else None."""
        if self.proc is None or self.stopped_by_us:
            return None
        rc = self.proc.poll()
        return rc if rc not in (None, 0) else None

    def remaining(self) -> int | None:
        """Input records not yet committed, as the current process last said (None before it spoke)."""
        return int(self.last["remaining"]) if self.last is not None else None

    def progress_since_start(self) -> float:
        """Share of what was left at this process's start that it has committed (Kafka's
        progress_percent / 100); 1.0 when nothing was left."""
        if self.last is None:
            return 0.0
        done, left = int(self.last["totalProcessed"]), int(self.last["remaining"])
        return 1.0 if done + left == 0 else done / (done + left)

    def logs(self, lines: int = 40) -> str:
        return (f"{self.transactional_id} (start #{self.starts}, exit {self.proc.poll() if self.proc else None}):\n"
                f"stdout tail:\n{tail(self.stdout_path, lines)}\nstderr tail:\n{tail(self.stderr_path, lines)}")
