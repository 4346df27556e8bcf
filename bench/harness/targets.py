"""The two brokers under test, started with the same settings, and what we observe from outside.

Both launchers come from flotilla/testenv/brokers (FlotillaBroker, ApacheKafka); this module only adds what a
measurement needs on top of them:

- start-to-ready time: from just before the broker process is spawned until its listener answers
  ApiVersions and a Metadata request that lists a broker (polled every 20 ms);
- Apache Kafka's stock JVM options (those of kafka-server-start.sh), instead of the test launcher's
  fast-start options (C1 only, small heap), so that Kafka is measured as people run it;
- a sampler of the broker's resident memory (VmRSS, summed over the process tree) and CPU time.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import BrokerStartError, FlotillaBroker, ServerProcess

TARGETS = ("flotilla", "apache")
LABELS = {"flotilla": "Flotilla", "apache": "Apache Kafka"}

# kafka-server-start.sh: KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS defaults (Kafka 4.x).
KAFKA_STOCK_JVM_OPTS = [
    "-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
]

# Kafka's default, written out on both sides: never fsync by message count, leave it to the OS.
FLUSH_NEVER = str(2 ** 63 - 1)


def broker_settings(partitions: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    """Settings given identically to both brokers (listeners and log.dirs come from the launchers)."""
    s = {
        "num.partitions": str(partitions),
        "log.flush.interval.messages": FLUSH_NEVER,
        "group.initial.rebalance.delay.ms": "0",
        "auto.create.topics.enable": "true",
    }
    s.update(extra or {})
    return s


READY_POLL = 0.02


class _Timed:
    """Mixin for a ServerProcess: measures start-to-ready of each start."""

    ready_seconds: float | None = None
    _spawned: float = 0.0

    def prepare(self) -> None:
        super().prepare()  # type: ignore[misc]
        # start() spawns the process right after prepare() returns.
        self._spawned = time.monotonic()

    def wait_ready(self, timeout: float | None = None) -> None:
        me: ServerProcess = self  # type: ignore[assignment]
        deadline = time.monotonic() + (timeout or me.start_timeout)
        self.ready_seconds = None
        while time.monotonic() < deadline:
            if me.proc is not None and me.proc.poll() is not None:
                break  # the launcher's wait_ready below reports the exit with the log tail
            try:
                with kafka_wire.connect(me.bootstrap, timeout=1.0) as conn:
                    conn.api_versions()
                    if conn.metadata(topics=[]).brokers:
                        self.ready_seconds = time.monotonic() - self._spawned
                        break
            except (OSError, EOFError, ValueError, RuntimeError):
                pass
            time.sleep(READY_POLL)
        # The launcher's own readiness checks (and error reporting); not part of the timing.
        super().wait_ready(timeout)  # type: ignore[misc]


class BenchFlotilla(_Timed, FlotillaBroker):
    pass


def apache_class() -> type:
    """ApacheKafka with kafka-server-start.sh's JVM options instead of the tests' fast-start ones."""
    from flotilla.testenv.brokers.apache_kafka import ApacheKafka, JVM_OPTS

    class BenchApacheKafka(_Timed, ApacheKafka):
        def command(self) -> list[str]:
            cmd = super().command()
            n = len(JVM_OPTS)
            for i in range(len(cmd) - n + 1):
                if cmd[i:i + n] == JVM_OPTS:
                    return cmd[:i] + KAFKA_STOCK_JVM_OPTS + cmd[i + n:]
            return cmd

    return BenchApacheKafka


def make_target(name: str, workdir: Path, settings: dict[str, str]) -> ServerProcess:
    if name == "flotilla":
        return BenchFlotilla(workdir, overrides=settings)
    if name == "apache":
        return apache_class()(workdir, overrides=settings)
    raise ValueError(f"unknown target {name!r}")


def apache_available(fetch: bool) -> tuple[bool, str]:
    """Whether Apache Kafka can run here; fetches the jars (Maven) only if `fetch`."""
    from flotilla.testenv.brokers import apache_kafka

    if not shutil.which("java"):
        return False, "no java on PATH"
    done = apache_kafka.kafka_home() / ".complete"
    if done.exists():
        return True, ""
    if not fetch:
        return False, f"Apache Kafka jars not cached ({done.parent}) and fetching is off"
    try:
        apache_kafka.ensure_kafka_libs()
        return True, ""
    except apache_kafka.KafkaSetupError as e:
        return False, str(e)


# -- observing a process from /proc ---------------------------------------------------------------

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _descendants(pid: int) -> list[int]:
    out, todo = [pid], [pid]
    while todo:
        p = todo.pop()
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    kids = [int(x) for x in f.read().split()]
                out += kids
                todo += kids
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            pass
    return out


def rss_bytes(pid: int) -> int:
    """VmRSS of the process and its descendants, in bytes (0 if gone)."""
    total = 0
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        break
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process and its descendants so far."""
    total = 0
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (FileNotFoundError, ProcessLookupError, IndexError):
            pass
    return total / _CLK_TCK


@dataclass
class Window:
    """What the sampler saw of the broker during one workload."""

    started: float = field(default_factory=time.monotonic)
    cpu_start: float = 0.0
    rss: list[int] = field(default_factory=list)
    seconds: float = 0.0
    cpu: float = 0.0

    def summary(self) -> dict[str, Any]:
        mb = 1024 * 1024
        return {
            "broker_rss_peak_mb": round(max(self.rss) / mb, 1) if self.rss else None,
            "broker_rss_mean_mb": round(sum(self.rss) / len(self.rss) / mb, 1) if self.rss else None,
            "broker_cpu_seconds": round(self.cpu, 3),
            "wall_seconds": round(self.seconds, 3),
        }


class Sampler:
    """Samples the broker's RSS every `interval` seconds into the open window, if any."""

    def __init__(self, pid: int, interval: float = 0.1):
        self.pid = pid
        self.interval = interval
        self._window: Window | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            rss = rss_bytes(self.pid)
            with self._lock:
                if self._window is not None and rss:
                    self._window.rss.append(rss)

    def open(self) -> Window:
        w = Window(cpu_start=cpu_seconds(self.pid))
        w.rss.append(rss_bytes(self.pid))
        with self._lock:
            self._window = w
        return w

    def close(self) -> Window:
        with self._lock:
            w, self._window = self._window, None
        assert w is not None
        rss = rss_bytes(self.pid)
        if rss:
            w.rss.append(rss)
        w.seconds = time.monotonic() - w.started
        w.cpu = cpu_seconds(self.pid) - w.cpu_start
        return w

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(2)


class Session:
    """One broker process with fresh data, for the workloads that share its settings."""

    def __init__(self, target: str, workdir: Path, settings: dict[str, str]):
        self.target = target
        self.workdir = workdir
        self.settings = settings
        self.broker: ServerProcess | None = None
        self.sampler: Sampler | None = None
        self.ready_seconds: float | None = None
        self.idle_rss_mb: float | None = None
        self.restarts = 0

    @property
    def bootstrap(self) -> str:
        assert self.broker is not None
        return self.broker.bootstrap

    def start(self) -> None:
        shutil.rmtree(self.workdir, ignore_errors=True)
        self.workdir.mkdir(parents=True)
        b = make_target(self.target, self.workdir, self.settings)
        self.broker = b
        # A first prepare() formats Kafka's storage (a JVM of its own), outside the timing.
        b.prepare()
        b.start()
        self.ready_seconds = getattr(b, "ready_seconds", None)
        time.sleep(0.3)  # let start-up work settle before the idle sample
        assert b.pid is not None
        self.idle_rss_mb = round(rss_bytes(b.pid) / (1024 * 1024), 1)
        self.sampler = Sampler(b.pid)

    def alive(self) -> bool:
        return self.broker is not None and self.broker.is_running()

    def exit_code(self) -> int | None:
        proc = self.broker.proc if self.broker else None
        return proc.poll() if proc is not None else None

    def restart_fresh(self) -> None:
        """After a crash: a new process on fresh data, so later workloads can still run."""
        self.close(keep_dir=True)
        self.restarts += 1
        log = self.workdir / "broker.log"
        keep = self.workdir.parent / f"{self.workdir.name}-crash{self.restarts}.log"
        if log.exists():
            shutil.copy(log, keep)
        self.start()

    def log_tail(self, lines: int = 40) -> str:
        return self.broker.log_tail(lines) if self.broker else ""

    def close(self, keep_dir: bool = False) -> None:
        if self.sampler:
            self.sampler.stop()
            self.sampler = None
        if self.broker:
            try:
                self.broker.stop(timeout=60)
            except Exception:
                self.broker.kill9()
        if not keep_dir:
            # Data can be large; keep only the broker log.
            shutil.rmtree(self.workdir / "data", ignore_errors=True)


__all__ = [
    "BrokerStartError", "LABELS", "Session", "TARGETS", "apache_available", "broker_settings",
    "cpu_seconds", "rss_bytes",
]
