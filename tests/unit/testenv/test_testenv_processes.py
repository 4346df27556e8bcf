"""Stopping a started process stops its whole process group."""

import time

from flotilla.testenv import processes


def test_stop_kills_the_process_group_including_children(tmp_path):
    # A shell that starts a grandchild ignoring SIGTERM: only the group kill with SIGKILL ends it.
    script = "trap '' TERM; sleep 300 & sleep 300"
    proc, record = processes.spawn("sh", ["sh", "-c", script], tmp_path / "sh.log")
    deadline = time.monotonic() + 5
    while len(processes.group_members(record.pid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(processes.group_members(record.pid)) >= 2
    assert processes.stop(record, grace=0.5) is True
    assert processes.group_members(record.pid) == []
    assert not processes.is_running(record.pid)
    proc.wait(timeout=5)


def test_a_recycled_pid_is_not_touched(tmp_path):
    proc, record = processes.spawn("sleep", ["sleep", "30"], tmp_path / "s.log")
    try:
        record.start_time += 1  # pretend the pid now belongs to another process
        assert processes.stop(record) is False
        assert processes.is_running(proc.pid)
    finally:
        proc.kill()
        proc.wait()
