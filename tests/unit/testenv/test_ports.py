"""Per-worker port blocks: two xdist workers are never handed the same port, and a worker does
not hand out a port again until its block wraps."""

import socket
import subprocess
import sys

import pytest

from flotilla.testenv import ports


@pytest.fixture(autouse=True)
def own_claims(tmp_path, monkeypatch):
    """Each test claims blocks in its own directory, away from any test session running beside it."""
    monkeypatch.setattr(ports, "CLAIMS_DIR", tmp_path / "claims")
    monkeypatch.setattr(ports, "_claim", None)
    monkeypatch.setattr(ports, "_block", None)


def test_workers_get_disjoint_blocks_below_the_ephemeral_range():
    blocks = [ports.worker_block(f"gw{i}") for i in range(ports.MAX_WORKERS)]
    seen: set[int] = set()
    for block in blocks:
        assert block is not None and block.stop <= 32768
        assert seen.isdisjoint(block)
        seen.update(block)
    assert ports.worker_block(None) is None and ports.worker_block("master") is None


def test_a_worker_hands_out_distinct_free_ports_from_its_block(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    block = ports.worker_block("gw3")
    got = [ports.free_port() for _ in range(50)]
    assert len(set(got)) == 50 and all(p in block for p in got)


def test_a_port_someone_listens_on_is_skipped(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    block = ports.worker_block("gw5")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", block.start))
        busy.listen()
        assert ports.free_port() != block.start


def test_outside_xdist_the_kernel_picks(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    assert low <= ports.free_port() <= high


def test_a_block_another_session_holds_is_not_shared(tmp_path, monkeypatch):
    """A second test session's gw2 (another process holding block 2's claim) makes this gw2 take
    the next block, not the same ports."""
    holder = subprocess.Popen(
        [sys.executable, "-c",
         "import sys; from pathlib import Path; from flotilla.testenv import ports;"
         f"ports.CLAIMS_DIR = Path({str(ports.CLAIMS_DIR)!r});"
         "print(ports.claimed_block('gw2').start, flush=True); sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs = int(holder.stdout.readline())
        monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
        ours = ports.claimed_block("gw2")
        assert theirs == ports.worker_block("gw2").start
        assert ours is not None and ours.start != theirs and ours == ports.worker_block("gw3")
        assert ports.free_port() in ours
    finally:
        holder.stdin.close()
        holder.wait(10)
