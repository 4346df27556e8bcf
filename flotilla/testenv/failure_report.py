"""What a failed test that used the cluster shows: the cluster's objects and events, the tails of
the control plane's logs, and the operator's log lines of that test.

Why: a wait that timed out says what it last saw, but not why (a pod Pending on a NotReady node, a
scheduler that never bound it, an operator handler that kept failing). These sections are part of
pytest's failure report, so CI prints them where the failure is.
"""

from __future__ import annotations

import logging
import subprocess
from collections import deque
from pathlib import Path
from typing import Any

#: Control-plane logs whose tails explain most failures of a test on the cluster.
LOGS = ("kube-controller-manager", "kube-scheduler", "kwok", "kubelet")
LOG_TAIL_LINES = 40
EVENT_LINES = 60
KUBECTL_TIMEOUT = 20.0


def _tail(path: Path, lines: int) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 256 * 1024))
            text = f.read().decode(errors="replace")
    except OSError as exc:
        return f"(unreadable: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def _kubectl(env: Any, *args: str) -> str:
    try:
        proc = env.kubectl(*args, check=False, timeout=KUBECTL_TIMEOUT)
    except (subprocess.SubprocessError, OSError) as exc:
        return f"(kubectl {' '.join(args)} failed: {exc})"
    return proc.stdout + (f"\n(stderr) {proc.stderr.strip()}" if proc.returncode else "")


def cluster_sections(env: Any) -> list[tuple[str, str]]:
    """(title, text) sections for a pytest report; `env` is a KubeEnv or a ControlPlane."""
    sections = [
        ("kubectl get pods,nodes -A -o wide", _kubectl(env, "get", "pods,nodes", "-A", "-o", "wide")),
        (f"kubectl get events -A (last {EVENT_LINES})",
         "\n".join(_kubectl(env, "get", "events", "-A", "--sort-by=.lastTimestamp").splitlines()[-EVENT_LINES:])),
    ]
    cp = getattr(env, "control_plane", env)
    for record in getattr(cp, "records", None) or []:
        if record.name in LOGS:
            sections.append((f"{record.name} log tail ({record.log})", _tail(Path(record.log), LOG_TAIL_LINES)))
    return sections


class RecentLog(logging.Handler):
    """The last lines logged by the operator (kopf and flotilla_operator loggers), counted so that
    a test's own lines can be picked out: the operator runs in-process (KopfRunner), and its output
    otherwise shows only when the runner exits."""

    LOGGERS = ("kopf", "flotilla_operator")

    def __init__(self, keep: int = 2000) -> None:
        super().__init__(logging.DEBUG)
        self.lines: deque[str] = deque(maxlen=keep)
        self.count = 0
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def install(self) -> None:
        for name in self.LOGGERS:
            logger = logging.getLogger(name)
            if self not in logger.handlers:
                logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.lines.append(self.format(record))
            self.count += 1
        except Exception:  # noqa: BLE001 - logging must never break the operator
            self.handleError(record)

    def mark(self) -> int:
        return self.count

    def since(self, mark: int) -> list[str]:
        """Lines logged after `mark` (as many as are still kept)."""
        new = min(self.count - mark, len(self.lines))
        return list(self.lines)[len(self.lines) - new:] if new > 0 else []


OPERATOR_LOG = RecentLog()
