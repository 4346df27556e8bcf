"""Per-worker port blocks: two xdist workers are never handed the same port, and a worker does
not hand out a port again until its block wraps."""

import socket

from flotilla.testenv import ports


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
    monkeypatch.setattr(ports, "_block", None)
    block = ports.worker_block("gw3")
    got = [ports.free_port() for _ in range(50)]
    assert len(set(got)) == 50 and all(p in block for p in got)


def test_a_port_someone_listens_on_is_skipped(monkeypatch):
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw5")
    monkeypatch.setattr(ports, "_block", None)
    block = ports.worker_block("gw5")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", block.start))
        busy.listen()
        assert ports.free_port() != block.start


def test_outside_xdist_the_kernel_picks(monkeypatch):
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    assert low <= ports.free_port() <= high
