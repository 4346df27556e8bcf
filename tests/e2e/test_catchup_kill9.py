"""KIP-333 catch-up consumer under kill -9: an application (tests/support/catchup_app.py) in this
mode is killed repeatedly, during normal consumption and while a gap is open, under steady
production. A ledger it writes before each commit shows that every acknowledged record was
processed at least once (duplicates are counted and reported), that a second crash while a gap is
open leaves two ranges, and that after each restart fresh records come before the gap is through.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import REPO_ROOT
from tests.support.catchup_ledger import Ledger, checkpoint_analysis
from flotilla.testenv.waiting import wait_for

ck = pytest.importorskip("confluent_kafka")

SETTINGS = {"offsets.topic.num.partitions": "4", "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000"}
PARTITIONS = 2


class Producer(threading.Thread):
    """Steady production of sequence numbers; `acked` holds the values the broker acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.p = ck.Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic = topic
        self.acked: set[int] = set()
        self.errors: list[str] = []
        self.sent = 0
        self.halt = threading.Event()

    def _done(self, err, msg) -> None:
        if err is None:
            self.acked.add(int(msg.value()))
        else:
            self.errors.append(str(err))

    def run(self) -> None:
        while not self.halt.is_set():
            self.p.produce(self.topic, value=str(self.sent).encode(), partition=self.sent % PARTITIONS,
                           on_delivery=self._done)
            self.sent += 1
            self.p.poll(0.004)
        self.p.flush(30)


class App:
    def __init__(self, bootstrap: str, topic: str, group: str, ledger: Path, log: Path) -> None:
        self.args = [sys.executable, "-m", "tests.support.catchup_app", bootstrap, topic, group,
                     str(ledger), "4"]
        self.log = log
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=f"{REPO_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.args, cwd=REPO_ROOT, env=env, stdout=out, stderr=out)

    def kill9(self) -> None:
        assert self.proc is not None and self.proc.poll() is None, f"app died early: {self.log.read_text()[-2000:]}"
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)


def gap_ends(life: list[tuple]) -> dict[int, int]:
    """Per partition, the end of the newest range this life opened (from its first ranges line)."""
    for e in life:
        if e[0] == "ranges" and e[1]:
            return {int(k.rsplit(":", 1)[1]): max(end for _s, end in r) for k, r in e[1].items()}
    return {}


@pytest.fixture
def kbroker(broker_factory):
    return broker_factory(dict(SETTINGS))


@pytest.fixture
def fleet(tmp_path, kube_env, kube_namespace):
    from flotilla.testenv.brokers.cluster import BrokerCluster

    overrides = dict(SETTINGS, **{"offsets.topic.replication.factor": "3", "min.insync.replicas": "2"})
    with BrokerCluster(tmp_path / "fleet", kube_env, kube_namespace, size=3, overrides=overrides) as c:
        yield c


def test_kill9_repeatedly_loses_nothing_and_serves_fresh_records_first(kbroker, tmp_path, record_property):
    run_kill9_scenario(kbroker.bootstrap, kbroker.bootstrap, 1, tmp_path, record_property)


@pytest.mark.kube
@pytest.mark.flotilla_only("a Flotilla fleet on Kubernetes metadata")
def test_kill9_repeatedly_on_a_three_broker_fleet(fleet, tmp_path, record_property):
    run_kill9_scenario(fleet.bootstrap, fleet.brokers[0].bootstrap, 3, tmp_path, record_property)


def run_kill9_scenario(bootstrap: str, one_broker: str, replicas: int, tmp_path: Path,
                       record_property) -> None:
    topic, group = kafka_wire.unique_topic("cu9"), f"g-{uuid.uuid4().hex[:8]}"
    with kafka_wire.connect(one_broker) as conn:
        assert conn.create_topic(topic, PARTITIONS, replication_factor=replicas) == ErrorCode.none
    ledger = Ledger(tmp_path / "ledger.txt")
    app = App(bootstrap, topic, group, ledger.path, tmp_path / "app.log")
    producer = Producer(bootstrap, topic)
    producer.start()
    try:
        # Life 1: normal consumption, killed after a while.
        app.start()
        wait_for("life 1 processing 300 records", lambda: len(ledger.values()) >= 300 or len(ledger.values()),
                 timeout=90, interval=0.2, until=lambda v: v is True)
        app.kill9()
        for life in (2, 3):
            # Dead for a while: the log grows by a few hundred records, the gap of the next life.
            sent = producer.sent
            wait_for("the log growing while the app is down", lambda: producer.sent - sent >= 600 or producer.sent,
                     timeout=60, interval=0.1, until=lambda v: v is True)
            app.start()
            if life == 2:
                # Killed while its gap is open: some gap records processed, the range still there.
                def gap_open():
                    cur = ledger.lives()[-1] if len(ledger.lives()) == life else []
                    gap = sum(1 for e in cur if e[0] == "rec" and e[1] == "catchup")
                    last_ranges = [e for e in cur if e[0] == "ranges"][-1:]
                    return (gap >= 30 and bool(last_ranges and last_ranges[0][1])) or (gap, last_ranges)
                wait_for("life 2 in the middle of its gap", gap_open, timeout=90, interval=0.05,
                         until=lambda v: v is True)
                app.kill9()
        # Life 3 runs to the end: production stops, every acknowledged record must arrive.
        wait_for("life 3 opening its ranges", lambda: len(ledger.lives()) == 3 and gap_ends(ledger.lives()[2]),
                 timeout=90, interval=0.2)
        producer.halt.set()
        producer.join(60)
        assert not producer.errors, producer.errors[:5]
        wait_for("every acknowledged record in the ledger",
                 lambda: (lambda missing: not missing or f"{len(missing)} missing, e.g. {sorted(missing)[:10]}")(
                     producer.acked - set(ledger.values())),
                 timeout=120, interval=0.5, until=lambda v: v is True)
        wait_for("the gaps closed", lambda: [e for e in ledger.lives()[-1] if e[0] == "ranges"][-1][1] == {}
                 or [e for e in ledger.lives()[-1] if e[0] == "ranges"][-1], timeout=60, interval=0.5,
                 until=lambda v: v is True)
    finally:
        producer.halt.set()
        app.stop()

    lives = ledger.lives()
    assert len(lives) == 3
    # At least once: every acknowledged record processed; duplicates are the price, counted.
    values = ledger.values()
    assert producer.acked <= set(values)
    dups = sum(n - 1 for n in Counter(values).values() if n > 1)
    record_property("catchup_duplicates", dups)
    record_property("catchup_records", len(values))
    problems, per_life = checkpoint_analysis(lives)
    print(f"catch-up kill -9: {len(producer.acked)} records acknowledged, {len(values)} processed,"
          f" {dups} duplicates; per life: {per_life}")
    # Every duplicate is a record whose checkpoint a kill lost, and no more than the killed lives
    # left unacknowledged: nothing was processed again behind an acknowledged commit.
    assert not problems, problems[:10]
    assert dups <= sum(life["unacknowledged_at_end"] for life in per_life[:-1]) + sum(
        life["unacknowledged_at_reassignments"] for life in per_life), (dups, per_life)
    # Lives 2 and 3 started at the log end with the gap as a range, and a second crash while a gap
    # was open left two ranges on some partition.
    first_ranges = [next(e[1] for e in life if e[0] == "ranges" and e[1]) for life in lives[1:]]
    assert any(len(r) == 2 for r in first_ranges[1].values()), first_ranges
    # Fresh records first: in each restarted life a record past the newest gap came before the last
    # record of that gap was processed (life 2 was killed before its gap was through at all).
    for n, life in enumerate(lives[1:], start=2):
        ends = gap_ends(life)
        recs = [e for e in life if e[0] == "rec"]
        first_fresh = next(i for i, e in enumerate(recs) if e[1] == "primary" and e[3] >= ends.get(e[2], 0))
        gap_last = [i for i, e in enumerate(recs) if e[1] == "catchup" and e[3] == ends.get(e[2], -1) - 1]
        assert recs[first_fresh][3] >= ends[recs[first_fresh][2]]
        if n == 2:
            assert not gap_last, "life 2 was meant to die with its gap open"
        else:
            assert gap_last and first_fresh < gap_last[0], (first_fresh, gap_last, ends)
