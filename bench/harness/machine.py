"""A description of the machine and software a run was measured on."""

from __future__ import annotations

import datetime
import os
import platform
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import REPO_ROOT


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_gb() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return None


def _java_version() -> str | None:
    java = shutil.which("java")
    if not java:
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return None
    return " ".join(out.splitlines()[:2]).strip() or None


def _git(*args: str) -> str | None:
    try:
        p = subprocess.run(["git", *args], capture_output=True, text=True, timeout=10, cwd=REPO_ROOT)
        return p.stdout.strip() or None
    except (OSError, subprocess.TimeoutExpired):
        return None


def load_snapshot(top: int = 6) -> dict[str, Any]:
    """Load averages and the busiest processes right now (the machine may be shared)."""
    one, five, fifteen = os.getloadavg()
    busiest: list[str] = []
    try:
        out = subprocess.run(["ps", "-eo", "pcpu,comm", "--sort=-pcpu"], capture_output=True, text=True,
                             timeout=10).stdout.splitlines()[1:top + 1]
        busiest = [" ".join(line.split()) for line in out]
    except (OSError, subprocess.TimeoutExpired):
        pass
    return {
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "loadavg": [round(one, 2), round(five, 2), round(fifteen, 2)],
        "busiest_processes": busiest,
    }


def describe() -> dict[str, Any]:
    from flotilla.testenv.brokers.apache_kafka import KAFKA_VERSION

    try:
        import confluent_kafka

        v = confluent_kafka.version()
        client = {"confluent-kafka": v if isinstance(v, str) else v[0], "librdkafka": confluent_kafka.libversion()[0]}
    except ImportError:
        client = {}
    return {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _mem_total_gb(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "java": _java_version(),
        "apache_kafka": KAFKA_VERSION,
        "kafka_tools": KAFKA_VERSION,
        "clients": client,
        "flotilla_commit": _git("rev-parse", "--short", "HEAD"),
    }


def _busy_jiffies() -> int:
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal guest guest_nice; guest time is in user already
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7]


class OtherLoad:
    """CPU used by everything except this harness and its children (brokers, clients), in cores,
    between two laps. Children count once they have been waited for, so call lap() when none runs."""

    def __init__(self) -> None:
        self._tick = os.sysconf("SC_CLK_TCK")
        self._mark = self._read()

    def _read(self) -> tuple[float, float, float]:
        t = os.times()
        mine = t.user + t.system + t.children_user + t.children_system
        return time.monotonic(), _busy_jiffies() / self._tick, mine

    def lap(self) -> float | None:
        now = self._read()
        wall = now[0] - self._mark[0]
        other = (now[1] - self._mark[1]) - (now[2] - self._mark[2])
        self._mark = now
        return round(max(0.0, other) / wall, 2) if wall > 0 else None
