"""Clean up after a test process that dies without its teardown (Ctrl-C, SIGKILL, an xdist worker
shut down mid-fixture).

Fixtures stop what they start, but only if their teardown runs. When pytest-xdist's controller is
interrupted it stops its workers before their session fixtures finish, and the brokers, control
planes, kubelet and containerd they started (each in its own session, so Ctrl-C does not reach
them) live on, holding ports, mounts and CPU.

So each test process starts a reaper: a small process in its own session, holding the read end of a
pipe whose write end only the owner has. The pipe reaches end-of-file when the owner exits for any
reason. The reaper then
1. stops every control plane the owner registered (`ControlPlane.down()` from its state file: with a
   real node that also kills containers, shims, mounts, network and cgroups), and
2. stops every process that still carries the owner's mark in its environment (`FLOTILLA_TEST_OWNER`,
   set in the owner's environment so every child inherits it): SIGTERM, a grace period, SIGKILL.

After a clean exit there is nothing left, and the reaper does nothing (and leaves no log).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

MARK = "FLOTILLA_TEST_OWNER"
GRACE_SECONDS = 10.0

_pipe: subprocess.Popen | None = None


def log_dir() -> Path:
    return Path(tempfile.gettempdir()) / "flotilla-reaper"


def start() -> str:
    """Start this process's reaper (once) and mark the environment children inherit; returns the mark."""
    global _pipe
    if _pipe is not None:
        return os.environ[MARK]
    mark = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != MARK}   # the reaper is not its own prey
    _pipe = subprocess.Popen([sys.executable, "-m", "flotilla.testenv.reaper", mark],
                             stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env=env, start_new_session=True, close_fds=True)
    os.environ[MARK] = mark
    return mark


def watch_control_plane(directory: Path) -> None:
    """Have the reaper stop the control plane in `directory` if this process dies before it does
    (a no-op in a process without a reaper, e.g. `flotilla testenv up`)."""
    if _pipe is None or _pipe.stdin is None:
        return
    try:
        _pipe.stdin.write(f"control-plane {directory.resolve()}\n".encode())
        _pipe.stdin.flush()
    except (BrokenPipeError, OSError):
        pass


def marked_processes(mark: str) -> list[int]:
    """Live processes whose environment carries `mark` (the reaper itself excluded)."""
    needle = f"{MARK}={mark}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and needle in environ.split(b"\0"):
            found.append(int(entry.name))
    return found


def stop_marked(mark: str, grace: float = GRACE_SECONDS) -> list[int]:
    """SIGTERM every marked process, SIGKILL what is left after `grace`; returns the pids found."""
    found = marked_processes(mark)
    for pid in found:
        _kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and marked_processes(mark):
        time.sleep(0.2)
    for pid in marked_processes(mark):
        _kill(pid, signal.SIGKILL)
    return found


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _stop_control_plane(directory: Path, say) -> None:
    """`flotilla testenv down --dir`, in its own process: what the fixture's ControlPlane.down()
    would have done (this module stays apart from the control plane's code)."""
    if not (directory / "state.json").exists():
        return   # stopped by its fixture already
    try:
        done = subprocess.run([sys.executable, "-m", "flotilla.cli", "testenv", "down", "--dir", str(directory)],
                              capture_output=True, text=True, timeout=300)
        say(f"stopping the control plane in {directory}: exit {done.returncode}; "
            f"{(done.stdout + done.stderr).strip()[-2000:]}")
    except (OSError, subprocess.SubprocessError) as exc:
        say(f"stopping the control plane in {directory} failed: {exc!r}")


def main(mark: str) -> int:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)   # outlive the owner's Ctrl-C; only EOF ends the watch
    planes: list[Path] = []
    for line in sys.stdin.buffer:
        kind, _, value = line.decode().strip().partition(" ")
        if kind == "control-plane" and value:
            planes.append(Path(value))
    lines: list[str] = []
    for directory in reversed(planes):
        _stop_control_plane(directory, lines.append)
    pids = stop_marked(mark)
    if pids:
        lines.append(f"stopped processes left by the owner: {pids}")
    if lines:
        log_dir().mkdir(parents=True, exist_ok=True)
        (log_dir() / f"{mark}.log").write_text(
            f"{time.strftime('%Y-%m-%d %H:%M:%S')} the test process died without its teardown\n"
            + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
