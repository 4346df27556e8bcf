"""The reaper stops what a test process started when that process dies without its teardown: a real
owner process is SIGKILLed and its children (marked, or a registered control plane) must go."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from flotilla.testenv import processes
from flotilla.testenv.waiting import wait_for

REPO = Path(__file__).resolve().parents[3]


def start_owner(tmp_path: Path, body: str) -> tuple[subprocess.Popen, dict]:
    """A process that starts its reaper, runs `body` (which sets `out`), prints `out` as JSON, then
    waits to be killed."""
    code = ("import json, subprocess, sys, time\n"
            "from pathlib import Path\n"
            "from flotilla.testenv import reaper, processes\n"
            "mark = reaper.start()\n"
            "out = {'mark': mark}\n"
            f"{body}\n"
            "print(json.dumps(out), flush=True)\n"
            "sys.stdin.read()\n")
    env = dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=str(REPO))
    owner = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env=env, text=True)
    return owner, json.loads(owner.stdout.readline())


def gone(pid: int) -> bool:
    return not processes.is_running(pid)


def test_marked_children_of_a_killed_owner_are_stopped(tmp_path):
    owner, out = start_owner(tmp_path, (
        # Its own session, as the brokers and control planes are: Ctrl-C on the owner does not reach it.
        "child = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
        "out['child'] = child.pid"))
    child = out["child"]
    assert processes.is_running(child)
    owner.kill()
    owner.wait(10)
    wait_for("the reaper to stop the owner's child", lambda: gone(child), timeout=30, interval=0.2)
    log = tmp_path / "flotilla-reaper" / f"{out['mark']}.log"
    wait_for("the reaper's log", log.exists, timeout=10, interval=0.2)
    # The pid in the list of stopped ones, not in the timestamp the log starts with.
    assert re.search(rf"stopped processes left by the owner: \[[^]]*\b{child}\b", log.read_text())


def test_a_registered_control_plane_is_stopped_from_its_state_file(tmp_path):
    """A process without the mark (started with its own environment) is still stopped when it is
    one of a registered control plane's processes: the reaper runs ControlPlane.down()."""
    owner, out = start_owner(tmp_path, (
        "from flotilla.testenv.control_plane import ControlPlane, Ports\n"
        f"cp = ControlPlane(directory=Path({str(tmp_path / 'cp')!r}), bin_dir=Path('/nonexistent'),"
        " ports=Ports(1, 2, 3, 4, 5, 6))\n"
        "cp.directory.mkdir()\n"
        "reaper.watch_control_plane(cp.directory)\n"
        "proc, record = processes.spawn('etcd', ['sleep', '300'], cp.directory / 'etcd.log', env={'PATH': '/usr/bin:/bin'})\n"
        "cp.records.append(record)\n"
        "cp.save_state()\n"
        "out['etcd'] = proc.pid"))
    etcd = out["etcd"]
    assert processes.is_running(etcd)
    os.kill(owner.pid, signal.SIGKILL)
    owner.wait(10)
    wait_for("the reaper to stop the control plane", lambda: gone(etcd), timeout=30, interval=0.2)
    # down() forgets a control plane it stopped, as `flotilla testenv down` does.
    wait_for("the control plane's state to be removed", lambda: not (tmp_path / "cp" / "state.json").exists(),
             timeout=20, interval=0.2)


def test_a_clean_exit_leaves_nothing_to_do_and_no_log(tmp_path):
    owner, out = start_owner(tmp_path, "")
    owner.stdin.close()
    assert owner.wait(10) == 0
    reapers = wait_for("the reaper to finish", lambda: not any(
        out["mark"] in " ".join(_cmdline(pid)) for pid in _pids()), timeout=20, interval=0.2)
    assert reapers
    assert not (tmp_path / "flotilla-reaper" / f"{out['mark']}.log").exists()


def _pids() -> list[int]:
    return [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []
