"""Network partitions between processes on this machine's loopback (issue 35), as Jepsen's
nemesis makes them between hosts: cut A from B both ways or one way, drop only B's answers to A,
isolate a node from the API server, from its peers, from its clients or from everyone, split the
nodes into a majority and a minority, lose a share of the packets from A to B, and heal.

How a packet is told apart on loopback, where every address is 127.0.0.1:
- each node (a broker) runs in a cgroup of its own (`launch_prefix`); the SYN of every connection
  it opens is marked with the node's connection mark (iptables CONNMARK on the cgroup match), so
  every packet of that connection, both ways, carries the mark of the node that opened it;
- a connection opened by any other process to a node's port is marked CLIENTS;
- a node's own ports (listeners, metrics) and the API server's port say which end a packet is
  going to: "from X to Y" is a packet of a connection X opened going to one of Y's ports, or of a
  connection Y opened leaving from one of X's ports.
So a one-way cut drops requests one way while the other side's connections still work, and an
answer-only cut (`drop_answers`) lets a node's requests reach the API server, which commits them,
while nothing it sends back arrives: the case of a write with an unknown outcome.

Cuts are silent (DROP, as a pulled cable or a partitioned switch): senders wait on TCP
retransmission and their own timeouts. Only the loopback interface is ever touched: every rule
lives in two chains of this instance's own, jumped to from OUTPUT for `-o lo`; `close()` removes
them and the cgroups (also after a failed test: use it as a context manager), and `reap_stale()`
removes what a killed test process left behind.

    with Nemesis() as nemesis:
        api = nemesis.add_server("api", api_port)
        b1 = nemesis.add_node("b1", [9092, 9404])          # before the process starts
        Popen(nemesis.launch_prefix(b1) + broker_command)
        nemesis.cut(b1, api); nemesis.drop_answers(b1, api); nemesis.heal()

Needs root, iptables with the cgroup, connmark and multiport matches, and cgroup v2.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

#: Where cgroup v2 is mounted: alone, or beside v1 controllers (a hybrid layout).
CGROUP2_MOUNTS = (Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup"))
CHAIN_PREFIX = "FLN-"
CLIENTS = "clients"


class NemesisUnavailable(RuntimeError):
    """This machine cannot cut loopback traffic (not root, no iptables or no cgroup v2)."""


def cgroup2_root() -> Path:
    for mount in CGROUP2_MOUNTS:
        if (mount / "cgroup.procs").exists() and (mount / "cgroup.controllers").exists():
            return mount
    raise NemesisUnavailable("no cgroup v2 hierarchy under /sys/fs/cgroup")


def available() -> str | None:
    """Why partitions cannot be made here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root (iptables and cgroups)"
    if shutil.which("iptables") is None:
        return "needs iptables (Debian package iptables)"
    try:
        cgroup2_root()
    except NemesisUnavailable as e:
        return str(e)
    return None


def _iptables(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"iptables {' '.join(args)}: {out.stderr.strip()}")
    return out


@dataclass(frozen=True)
class Node:
    """A process (and its children) whose traffic can be cut, or a server known by its port."""

    name: str
    ports: tuple[int, ...]
    mark: int
    cgroup: str | None = None  # path below the cgroup v2 root; None: a server outside our cgroups


@dataclass
class Cut:
    """Packets from `src` to `dst` dropped (one direction)."""

    src: Node
    dst: Node
    answers_only: bool = False  # only on connections dst opened (drop_answers)
    loss: float = 1.0  # the share of those packets dropped (lossy)
    rules: list[list[str]] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.src.name} -> {self.dst.name}" + (" (answers)" if self.answers_only else "")
                + (f" ({self.loss:.0%} lost)" if self.loss < 1.0 else ""))


@dataclass
class Nemesis:
    tag: str = field(default_factory=lambda: f"{os.getpid()}-{random.randrange(1 << 16):04x}")
    nodes: dict[str, Node] = field(default_factory=dict)
    cuts: list[Cut] = field(default_factory=list)

    def __post_init__(self) -> None:
        why = available()
        if why is not None:
            raise NemesisUnavailable(why)
        reap_stale()  # what a killed test process left
        self._root = cgroup2_root()
        self._cgroup_dir = f"flotilla-nemesis-{self.tag}"
        (self._root / self._cgroup_dir).mkdir(exist_ok=True)
        # Connection marks unique to this instance (tests in parallel each have one).
        self._mark_base = (random.randrange(1, 1 << 12) << 16)
        self._marks = itertools.count(1)
        self.clients = Node(CLIENTS, (), self._mark_base)
        self._mark_chain = f"{CHAIN_PREFIX}{self.tag}-M"[:28]
        self._drop_chain = f"{CHAIN_PREFIX}{self.tag}-D"[:28]
        # OUTPUT jumps to the mark chain first, then the drop chain (each inserted at the top).
        for chain in (self._drop_chain, self._mark_chain):
            _iptables("-N", chain)
            _iptables("-I", "OUTPUT", "1", "-o", "lo", "-j", chain)
        self._let_resets_through()
        self._closed = False

    # -- nodes --------------------------------------------------------------------------------
    def add_node(self, name: str, ports) -> Node:
        """A node whose processes are started with `launch_prefix(node)` (before any of them
        opens a connection: connections are marked when they open)."""
        cgroup = f"{self._cgroup_dir}/{name}"
        (self._root / cgroup).mkdir(exist_ok=True)
        node = Node(name, tuple(int(p) for p in ports), self._mark_base + next(self._marks), cgroup)
        self.nodes[name] = node
        _iptables("-A", self._mark_chain, "-m", "conntrack", "--ctstate", "NEW", "-m", "cgroup", "--path", cgroup,
                  "-j", "CONNMARK", "--set-mark", str(node.mark))
        self._mark_clients()
        return node

    def add_server(self, name: str, port: int) -> Node:
        """A server outside our cgroups (the API server): reached at `port`, never a connector."""
        node = Node(name, (int(port),), self._mark_base + next(self._marks))
        self.nodes[name] = node
        return node

    def launch_prefix(self, node: Node) -> list[str]:
        """Prefix for a command line: the process joins the node's cgroup, then execs it."""
        procs = self._root / node.cgroup / "cgroup.procs"
        return ["sh", "-c", 'echo $$ > "$0" && exec "$@"', str(procs)]

    def _mark_clients(self) -> None:
        """Connections that no node opened, to a node's ports: the clients'. One rule, rewritten
        as nodes are added (it must stay after every node's own rule)."""
        _iptables("-D", self._mark_chain, *self._clients_rule_args(), check=False)
        self._clients_ports = sorted({p for n in self.nodes.values() if n.cgroup for p in n.ports})
        _iptables("-A", self._mark_chain, *self._clients_rule_args())

    def _clients_rule_args(self) -> list[str]:
        ports = getattr(self, "_clients_ports", []) or [0]
        return ["-p", "tcp", "-m", "conntrack", "--ctstate", "NEW", "-m", "connmark", "--mark", "0",
                "-m", "multiport", "--dports", ",".join(map(str, ports[:15])),
                "-j", "CONNMARK", "--set-mark", str(self.clients.mark)]

    def brokers(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.cgroup is not None]

    # -- faults -------------------------------------------------------------------------------
    def drop(self, src: Node, dst: Node, *, reset: bool = False) -> None:
        """Packets from `src` to `dst` are dropped: requests on connections src opened to dst's
        ports, and answers on connections dst opened to src's ports. With `reset` they are
        answered with a TCP reset instead (a refused connection: the sender learns at once)."""
        verdict = ["-j", "REJECT", "--reject-with", "tcp-reset"] if reset else ["-j", "DROP"]
        self._add(Cut(src, dst, rules=[match + verdict for match in self._matches(src, dst)]))

    def lossy(self, src: Node, dst: Node, loss: float) -> None:
        """A share `loss` (0 < loss < 1) of the packets from `src` to `dst` dropped at random: a
        flaky link, where TCP retransmits and latency grows instead of a clean cut. (Delay, as
        `tc netem` makes it, needs the sch_netem kernel module, which this kernel may lack.)"""
        if not 0.0 < loss < 1.0:
            raise ValueError(f"loss must be between 0 and 1 (exclusive), not {loss}")
        drop = ["-m", "statistic", "--mode", "random", "--probability", f"{loss:.4f}", "-j", "DROP"]
        self._add(Cut(src, dst, loss=loss, rules=[match + drop for match in self._matches(src, dst)]))

    def cut(self, a: Node, b: Node, *, one_way: bool = False, reset: bool = False) -> None:
        """a cannot send to b; unless one_way, b cannot send to a either."""
        self.drop(a, b, reset=reset)
        if not one_way:
            self.drop(b, a, reset=reset)

    def restore(self, a: Node, b: Node) -> None:
        """Remove the cuts between a and b (both directions), leaving the others."""
        for cut in [c for c in self.cuts if {c.src.name, c.dst.name} == {a.name, b.name}]:
            for rule in cut.rules:
                _iptables("-D", self._drop_chain, *rule, check=False)
            self.cuts.remove(cut)
            log.info("nemesis: restored %s", cut)

    def drop_answers(self, a: Node, server: Node) -> None:
        """What `server` sends on connections `a` opened never arrives, while a's requests do
        (the server acts on them): every write a makes has an unknown outcome."""
        self._add(Cut(server, a, answers_only=True, rules=[
            ["-p", "tcp", "-m", "connmark", "--mark", str(a.mark), "-m", "multiport", "--sports", chunk, "-j", "DROP"]
            for chunk in _chunks(server.ports)]))

    def isolate(self, node: Node, *, api: Node | None = None, peers: bool = False, clients: bool = False) -> None:
        """Cut `node` both ways from the API server (`api`), from the other nodes (`peers`), from
        its clients (`clients`), or any mix (all three: isolated from everyone)."""
        if api is not None:
            self.cut(node, api)
        if peers:
            for other in self.brokers():
                if other is not node:
                    self.cut(node, other)
        if clients:
            self.cut(node, self.clients)

    def split(self, *groups) -> None:
        """Nodes in different groups cannot reach each other (a majority/minority split); the API
        server, if named in a group, is reachable from that group only."""
        for i, g1 in enumerate(groups):
            for g2 in groups[i + 1:]:
                for a in g1:
                    for b in g2:
                        self.cut(a, b)

    def heal(self) -> None:
        """Every cut removed (connections that were cut recover by TCP retransmission)."""
        _iptables("-F", self._drop_chain)
        self._let_resets_through()
        self.cuts.clear()

    def _let_resets_through(self) -> None:
        """TCP resets pass every cut: a `reset` cut answers with one, which the opposite direction's
        rule would otherwise drop (a DROP cut makes none of its own)."""
        _iptables("-A", self._drop_chain, "-p", "tcp", "--tcp-flags", "RST", "RST", "-j", "RETURN")

    def describe(self) -> str:
        return ", ".join(map(str, self.cuts)) or "no cuts"

    def _add(self, cut: Cut) -> None:
        log.info("nemesis: drop %s", cut)
        for rule in cut.rules:
            _iptables("-A", self._drop_chain, *rule)
        self.cuts.append(cut)

    def _matches(self, src: Node, dst: Node) -> list[list[str]]:
        """iptables match arguments for the packets from src to dst: on connections src opened,
        those going to dst's ports; on connections dst opened, those leaving from src's ports.
        (Clients have no ports, servers open no connections: their halves match nothing.)"""
        rules = []
        for chunk in _chunks(dst.ports):
            rules.append(["-p", "tcp", "-m", "connmark", "--mark", str(src.mark),
                          "-m", "multiport", "--dports", chunk])
        for chunk in _chunks(src.ports):
            rules.append(["-p", "tcp", "-m", "connmark", "--mark", str(dst.mark),
                          "-m", "multiport", "--sports", chunk])
        return rules

    # -- clean-up -----------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for chain in (self._mark_chain, self._drop_chain):
            _iptables("-D", "OUTPUT", "-o", "lo", "-j", chain, check=False)
            _iptables("-F", chain, check=False)
            _iptables("-X", chain, check=False)
        _remove_cgroups(self._root / self._cgroup_dir, self._root)

    def __enter__(self) -> "Nemesis":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _chunks(ports) -> list[str]:
    ports = [str(p) for p in ports]
    return [",".join(ports[i:i + 15]) for i in range(0, len(ports), 15)]


def _remove_cgroups(top: Path, root: Path) -> None:
    """Move what still runs in them to the root cgroup, then remove them (leaves first)."""
    if not top.exists():
        return
    for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)) + [top]:
        try:
            for pid in (d / "cgroup.procs").read_text().split():
                try:
                    (root / "cgroup.procs").write_text(pid)
                except OSError:
                    pass
            d.rmdir()
        except OSError as e:
            log.warning("nemesis: cannot remove cgroup %s: %s", d, e)


def reap_stale() -> list[str]:
    """Remove the chains and cgroups of Nemesis instances whose process is gone (a test killed
    before its clean-up ran). Returns what was removed."""
    if available() is not None:
        return []
    removed = []
    rules = _iptables("-S", check=False).stdout.splitlines()
    chains = {line.split()[1] for line in rules if line.startswith("-N " + CHAIN_PREFIX)}
    for chain in sorted(chains):
        pid = chain[len(CHAIN_PREFIX):].split("-")[0]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _iptables("-D", "OUTPUT", "-o", "lo", "-j", chain, check=False)
            _iptables("-F", chain, check=False)
            _iptables("-X", chain, check=False)
            removed.append(chain)
    root = cgroup2_root()
    for d in root.glob("flotilla-nemesis-*"):
        pid = d.name.split("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _remove_cgroups(d, root)
            removed.append(str(d))
    return removed
