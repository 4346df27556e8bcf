"""The nemesis cuts what it says and nothing else (flotilla/testenv/nemesis.py), with real
processes, real sockets on loopback and real iptables rules: two nodes, each an echo server in
its own cgroup, and this test process as their client."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from flotilla.testenv import nemesis as nemesis_mod
from flotilla.testenv.nemesis import Nemesis
from flotilla.testenv.brokers.broker_process import free_port

pytestmark = pytest.mark.skipif(nemesis_mod.available() is not None,
                                reason=f"nemesis: {nemesis_mod.available()}")

# An echo server that writes each line it receives to a file (so a request that arrived can be
# told from one that did not, when its answer is dropped).
SERVER = """
import socket, sys, threading
srv = socket.create_server(("127.0.0.1", int(sys.argv[1])))
def serve(c):
    with c, open(sys.argv[2], "a") as seen:
        for line in c.makefile("rb"):
            seen.write(line.decode()); seen.flush(); c.sendall(line)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"""
# Connect to a port, send one line, print the answer (or what failed).
ASK = """
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1.0) as c:
        c.sendall(sys.argv[2].encode() + b"\\n")
        print(c.makefile("rb").readline().decode().strip() or "closed")
except OSError as e:
    print(type(e).__name__)
"""


def ask_from_test(port: int, word: str, sock: socket.socket | None = None, timeout: float = 1.0) -> str:
    try:
        c = sock or socket.create_connection(("127.0.0.1", port), timeout=timeout)
        c.settimeout(timeout)
        c.sendall(word.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = c.recv(100)
            if not chunk:
                return "closed"
            data += chunk
        return data.decode().strip()
    except OSError as e:
        return type(e).__name__


@pytest.fixture
def two_nodes(tmp_path):
    with Nemesis() as nemesis:
        procs = []
        nodes = {}
        for name in ("a", "b"):
            port = free_port()
            node = nemesis.add_node(name, [port])
            seen = tmp_path / f"{name}.seen"
            seen.touch()
            procs.append(subprocess.Popen(nemesis.launch_prefix(node) + [sys.executable, "-c", SERVER,
                                                                        str(port), str(seen)]))
            nodes[name] = (node, seen)
        try:
            for node, _ in nodes.values():
                deadline = time.monotonic() + 10
                while ask_from_test(node.ports[0], "up") != "up":
                    assert time.monotonic() < deadline, f"echo server {node.name} did not start"
                    time.sleep(0.05)

            def ask(src, dst, word):
                out = subprocess.run(nemesis.launch_prefix(nodes[src][0]) + [
                    sys.executable, "-c", ASK, str(nodes[dst][0].ports[0]), word], capture_output=True, text=True)
                return out.stdout.strip()
            yield nemesis, nodes, ask
        finally:
            for p in procs:
                p.kill()
                p.wait()


def test_cuts_drop_what_they_name_and_heal_restores_it(two_nodes):
    nemesis, nodes, ask = two_nodes
    a, b = nodes["a"][0], nodes["b"][0]
    assert ask("a", "b", "hello") == "hello" and ask("b", "a", "hello") == "hello"

    nemesis.cut(a, b)
    assert ask("a", "b", "x") == "TimeoutError" and ask("b", "a", "x") == "TimeoutError"
    assert ask_from_test(a.ports[0], "client") == "client"  # clients still reach both
    assert ask_from_test(b.ports[0], "client") == "client"

    nemesis.heal()
    assert ask("a", "b", "again") == "again"

    nemesis.isolate(a, clients=True)
    assert ask_from_test(a.ports[0], "client") == "TimeoutError"
    assert ask("b", "a", "peer") == "peer"  # a's peers still reach it
    nemesis.cut(a, b, reset=True)
    assert ask("b", "a", "x") == "ConnectionRefusedError"  # reset: refused at once
    nemesis.restore(a, b)  # only that cut: the clients' stays
    assert ask("b", "a", "peer") == "peer"
    assert ask_from_test(a.ports[0], "client") == "TimeoutError"
    nemesis.heal()
    assert nemesis.describe() == "no cuts"


def test_a_one_way_cut_lets_requests_arrive_whose_answers_are_lost(two_nodes):
    """b cannot send to a: on a connection a opened before the cut, a's request reaches b (b
    acts on it), b's answer never arrives."""
    nemesis, nodes, ask = two_nodes
    a, b = nodes["a"][0], nodes["b"][0]
    seen_b = nodes["b"][1]
    # an established connection of this test process (a client) to b, then answers dropped
    conn = socket.create_connection(("127.0.0.1", b.ports[0]), timeout=1.0)
    assert ask_from_test(b.ports[0], "before", conn) == "before"
    nemesis.drop_answers(nemesis.clients, b)
    assert ask_from_test(b.ports[0], "unanswered", conn) == "TimeoutError"
    assert "unanswered" in seen_b.read_text(), "the request must have reached b"
    assert ask("a", "b", "peer") == "peer"  # only the clients' connections are affected
    nemesis.heal()

    nemesis.cut(b, a, one_way=True)
    assert ask("b", "a", "x") == "TimeoutError"
    nemesis.heal()
    conn.close()


def test_a_lossy_link_drops_some_packets_at_random_and_heals(two_nodes):
    """30% of the clients' packets to a lost: some short exchanges (a SYN, then the data) get
    through within 0.3 s, and some do not (a lost SYN is resent only after a second); the other
    node is untouched."""
    nemesis, nodes, ask = two_nodes
    a, b = nodes["a"][0], nodes["b"][0]
    nemesis.lossy(nemesis.clients, a, 0.3)
    assert "30% lost" in nemesis.describe()
    answers = [ask_from_test(a.ports[0], "w", timeout=0.3) for _ in range(20)]
    assert 0 < answers.count("w") < len(answers), answers
    assert all(ask_from_test(b.ports[0], "w", timeout=0.3) == "w" for _ in range(5))
    nemesis.heal()
    assert all(ask_from_test(a.ports[0], "w", timeout=0.3) == "w" for _ in range(5))
    with pytest.raises(ValueError, match="loss"):
        nemesis.lossy(nemesis.clients, a, 1.0)


def test_close_removes_every_rule_and_cgroup():
    with Nemesis() as nemesis:
        node = nemesis.add_node("n", [free_port()])
        nemesis.cut(node, nemesis.clients)
        chains = (nemesis._mark_chain, nemesis._drop_chain)
        cgroup = nemesis._root / nemesis._cgroup_dir
        assert cgroup.exists()
    rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True).stdout
    assert not any(c in rules for c in chains)
    assert not cgroup.exists()
