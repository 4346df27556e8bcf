"""Starting background processes in their own process groups, and stopping them for sure.

Each process is the leader of a new session, so stopping it means signalling its whole group:
SIGTERM, a grace period, then SIGKILL, and a check that nothing in the group is left. A pid is only
signalled when its start time still matches the one recorded, so a recycled pid is never touched.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path


@dataclass
class ProcessRecord:
    """What `up` remembers about one started process (stored as JSON in the state file)."""

    name: str
    pid: int
    start_time: int
    log: str

    def to_json(self) -> dict:
        return asdict(self)


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name is in parentheses and may contain spaces: split after the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """The process start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def is_running(pid: int, expected_start: int | None = None) -> bool:
    """True if pid is alive (not a zombie) and, if given, started at expected_start."""
    fields = _stat_fields(pid)
    if not fields or fields[0] in ("Z", "X"):
        return False
    return expected_start is None or int(fields[19]) == expected_start


def group_members(pgid: int) -> list[int]:
    """Live processes whose process group is pgid."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name))
        if fields and fields[0] not in ("Z", "X") and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def spawn(name: str, argv: list[str], log_path: Path, env: dict[str, str] | None = None,
          cwd: Path | None = None) -> tuple[subprocess.Popen, ProcessRecord]:
    """Start argv in the background, in a new session, output appended to log_path."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        out.write(f"$ {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=env, cwd=cwd, start_new_session=True, close_fds=True,
        )
    return proc, ProcessRecord(name, proc.pid, start_time(proc.pid) or 0, str(log_path))


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _reap(pid: int) -> None:
    """Collect the exit status if pid is our child, so it does not linger as a zombie."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop(record: ProcessRecord, grace: float = 10.0) -> bool:
    """Stop a recorded process and its group. Returns True if anything had to be stopped."""
    if not is_running(record.pid, record.start_time or None):
        _reap(record.pid)
        return False
    pgid = record.pid  # a session leader's pgid is its pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        _reap(record.pid)
        if not group_members(pgid):
            return True
        time.sleep(0.1)
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        _reap(record.pid)
        if not group_members(pgid):
            return True
        time.sleep(0.1)
    left = group_members(pgid)
    raise RuntimeError(f"{record.name}: processes {left} survived SIGKILL")
