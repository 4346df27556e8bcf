"""tests/support/message_copier.py without Kafka: a stand-in process prints the copier's status
lines (as kafka-tools 4.1 writes them), so that progress, restarts and the exits the system test
tells apart are checked here."""

from __future__ import annotations

import sys
import time

import pytest

from tests.support import message_copier
from tests.support.message_copier import Copier
from flotilla.testenv.waiting import wait_for

# Prints the copier's status lines for 10 input records, 4 per "transaction", then exits 0; a
# leading "crash" argument exits 1 after the first transaction instead.
FAKE = """
import json, sys, time
tid = sys.argv[sys.argv.index("--transactional-id") + 1]
crash = sys.argv[1] == "crash"
left, done = 10, 0
print("log4j: not a status line", flush=True)
while left > 0:
    print(json.dumps({"transactionalId": tid, "stage": "ProcessLoop", "totalProcessed": done, "consumed": done,
                      "remaining": left}), flush=True)
    time.sleep(0.2)
    if crash and done:
        sys.exit(1)
    n = min(4, left)
    left, done = left - n, done + n
print(json.dumps({"transactionalId": tid, "stage": "ShutdownComplete", "totalProcessed": done, "remaining": 0}), flush=True)
"""


@pytest.fixture
def fake(monkeypatch):
    mode = {"arg": "ok"}
    monkeypatch.setattr(message_copier.kafka_tools, "command",
                        lambda tool, *args: [sys.executable, "-c", FAKE, mode["arg"], *args])
    return mode


def copier(tmp_path) -> Copier:
    return Copier(tmp_path, "127.0.0.1:9", transactional_id="copier-0", group="g", input_topic="in", partition=0,
                  output_topic="out", transaction_size=4, transaction_timeout_ms=30000, use_group_metadata=True)


def test_progress_and_a_clean_finish(tmp_path, fake) -> None:
    c = copier(tmp_path).start()
    try:
        assert "--use-group-metadata" in c.args and "--enable-random-aborts" in c.args
        wait_for("the copier to finish", c.done, timeout=30)
        assert c.remaining() == 0 and c.progress_since_start() == 1.0
        assert c.unexpected_exit() is None
        assert '"ShutdownComplete"' in c.stdout_path.read_text()
    finally:
        c.close()


def test_a_restart_starts_progress_afresh_and_is_no_unexpected_exit(tmp_path, fake) -> None:
    c = copier(tmp_path).start()
    try:
        wait_for("a first status line", c.remaining, timeout=30, until=lambda r: r is not None)
        c.restart(clean=False)
        assert c.starts == 2 and c.unexpected_exit() is None
        wait_for("the restarted copier to finish", c.done, timeout=30)
        assert "==== start #2" in c.stdout_path.read_text()
    finally:
        c.close()


def test_an_exit_of_its_own_is_reported(tmp_path, fake) -> None:
    fake["arg"] = "crash"
    c = copier(tmp_path).start()
    try:
        wait_for("the copier to crash", c.unexpected_exit, timeout=30, until=lambda rc: rc == 1)
        assert not c.done()
        assert 0 < c.progress_since_start() < 1
        assert "start #1" in c.logs()
    finally:
        c.close()


def test_a_stop_is_not_done(tmp_path, fake) -> None:
    c = copier(tmp_path).start()
    time.sleep(0.3)
    c.stop(clean=True)
    assert not c.done() and c.unexpected_exit() is None
