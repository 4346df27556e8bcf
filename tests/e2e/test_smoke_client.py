"""`python -m flotilla.smoke`, the client smoke test the Helm chart's `helm test` Pod runs and the
operations guide tells users to run: against a real broker it produces one record and reads it
back (exit 0); against an address where nothing listens it fails, saying which step failed.

    pytest tests/e2e/test_smoke_client.py
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from flotilla.testenv.brokers.broker_process import FlotillaBroker, free_port


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = FlotillaBroker(tmp_path_factory.mktemp("smoke-broker"))
    b.start()
    try:
        yield b
    finally:
        b.close()


def smoke(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flotilla.smoke", *args], capture_output=True, text=True, timeout=120)


def test_round_trip_through_a_real_broker(broker):
    first = smoke("--bootstrap-server", broker.bootstrap, "--timeout", "60")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("OK: produced and consumed flotilla-smoke-") and broker.bootstrap in first.stdout
    # Again: the topic exists now, and the fresh value (not the first one) must come back.
    second = smoke("--bootstrap-server", broker.bootstrap, "--timeout", "60")
    assert second.returncode == 0, second.stderr
    assert second.stdout.split()[4] != first.stdout.split()[4]


def test_nothing_listening_fails_naming_the_step():
    proc = smoke("--bootstrap-server", f"127.0.0.1:{free_port()}", "--timeout", "5")
    assert proc.returncode == 1
    assert proc.stderr.startswith("FAILED: ") and "flotilla-smoke" in proc.stderr, proc.stderr
