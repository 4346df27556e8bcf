"""Kafka's own transactions system test (kafkatest core/transactions_test.py), reproduced here
(issue 19): three brokers; an input topic of 2 partitions and an output topic of 3, RF=3,
min.insync.replicas=2; the input seeded by an idempotent producer; one Kafka
TransactionalMessageCopier (kafka-tools 4.1) per input partition, with random aborts (one copier
with --use-group-metadata, the other without: both offset-commit APIs in one run); while they copy,
the brokers are bounced one after the other (kill -9 and clean restarts), or the copiers are (three
rounds, as Kafka's test, kill -9 and clean alternating); a read_committed consumer reads the output
throughout. At the end, the output read_committed is exactly the input: no duplicate, nothing
missing, each partition in input order (Kafka's check_order), and so is what the concurrent
consumer read; a read_uncommitted read sees more (the aborted transactions' records).

Scale: on Flotilla, Kafka's own: 100,000 records in transactions of 750 (about 67 committed
transactions per copier; the copy takes a minute or two on a loaded 2-CPU machine, so the bounces,
triggered by the copy's progress, land in the middle of it). Against Apache Kafka (the smaller run
that shows the test itself is right; `make interop-apache`) 20,000 records in transactions of 150:
the same number of transactions. Kafka runs each bounce mode in its own test case; here one run
mixes them, to pay for one cluster, not four.
FLOTILLA_TXN_SYSTEM_RECORDS and FLOTILLA_TXN_SYSTEM_TXN_SIZE override the scale.

    pytest -m kube tests/e2e/test_transactions_system.py
    pytest tests/e2e/test_transactions_system.py --kafka-target=apache
"""

from __future__ import annotations

import os
from collections import Counter
import threading
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.test_replication import create_topic, wait_isr
from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.fleet import Fleet
from tests.support.fleet import fleet_cluster
from tests.support.message_copier import Copier
from flotilla.testenv.waiting import wait_for

ck = pytest.importorskip("confluent_kafka")

pytestmark = [pytest.mark.kube, pytest.mark.timeout(1200)]

SCALE = {"flotilla": (100_000, 750), "apache": (20_000, 150)}
INPUT_PARTITIONS, OUTPUT_PARTITIONS = 2, 3
# Kafka's test: a transaction timeout below its progress timeout, so that a copier restarted after a
# kill -9 is not stuck for long behind the dead one's undecided offsets (its read_committed
# consumer waits for them: UNSTABLE_OFFSET_COMMIT until the coordinator aborts the transaction),
# but above what a broker bounce may hold a request up.
TRANSACTION_TIMEOUT_MS = 30_000
COPIER_PROGRESS_TIMEOUT = 180.0
ALL = {1, 2, 3}

SETTINGS = {"offsets.topic.replication.factor": "3", "transaction.state.log.replication.factor": "3",
            "transaction.state.log.min.isr": "2", "transaction.state.log.num.partitions": "6",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "2000",
            "replica.lag.time.max.ms": "10000", "replica.fetch.backoff.ms": "200"}
# Kafka fences a broker that stops heartbeating after broker.session.timeout.ms (Flotilla's
# Lease duration in flotilla/testenv/brokers/cluster.py is 6 s).
APACHE_SETTINGS = {"broker.session.timeout.ms": "6000", "broker.heartbeat.interval.ms": "1000"}


@pytest.fixture
def cluster(kafka_target, tmp_path, request) -> Iterator[Fleet]:
    try:
        kafka_tools.ensure_libs()
    except kafka_tools.ToolsMissing as e:
        pytest.fail(f"the copier needs Kafka's tools: {e}")
    with fleet_cluster(kafka_target, tmp_path / "cluster", request, overrides=SETTINGS,
                       apache_overrides=APACHE_SETTINGS) as c:
        yield c


def scale(kafka_target: str) -> tuple[int, int]:
    records, size = SCALE[kafka_target]
    return (int(os.environ.get("FLOTILLA_TXN_SYSTEM_RECORDS", records)),
            int(os.environ.get("FLOTILLA_TXN_SYSTEM_TXN_SIZE", size)))


def all_bootstrap(cluster: Fleet) -> str:
    """Every broker, running or not: clients given this keep finding the cluster across bounces."""
    return ",".join(b.bootstrap for b in cluster.brokers)


def seed(bootstrap: str, topic: str, count: int) -> dict[int, list[int]]:
    """Values 0..count-1 (decimal strings), i to partition i % 2, idempotent and acks=all; what
    each partition holds, in order."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "linger.ms": 20, "batch.num.messages": 2000})
    failures: list[object] = []

    def report(err, _msg) -> None:
        if err is not None:
            failures.append(err)
    for i in range(count):
        while True:
            try:
                p.produce(topic, str(i).encode(), partition=i % INPUT_PARTITIONS, on_delivery=report)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    assert p.flush(120) == 0, "the seed producer did not deliver everything within 120s"
    assert not failures, f"seeding failed: {failures[:3]}"
    return {part: list(range(part, count, INPUT_PARTITIONS)) for part in range(INPUT_PARTITIONS)}


class OutputReader:
    """A consumer of the output topic in a thread, every partition assigned from the start and no
    group: what it returns is what the log gives, not a group's replays after a rebalance."""

    # What librdkafka reports while brokers bounce, and retries by itself.
    TRANSIENT = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_PARTITION_EOF", "_RESOLVE", "_TIMED_OUT")

    def __init__(self, bootstrap: str, topic: str, isolation: str = "read_committed") -> None:
        self.topic, self.isolation = topic, isolation
        self.records: list[tuple[int, int, int]] = []  # (partition, offset, value)
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": kafka_wire.unique_topic("txsys-read"),
                                      "isolation.level": isolation, "enable.auto.commit": False,
                                      "auto.offset.reset": "earliest", "topic.metadata.refresh.interval.ms": 2000})
        self._consumer.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(OUTPUT_PARTITIONS)])
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"reader-{topic}")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for m in self._consumer.consume(500, 0.5):
                if m.error() is None:
                    self.records.append((m.partition(), m.offset(), int(m.value())))
                elif not any(t in str(m.error()) for t in self.TRANSIENT):
                    self.errors.append(str(m.error()))

    def read(self, want: int, what: str, timeout: float = 180.0) -> list[tuple[int, int, int]]:
        """At least `want` records, then until none came for 3 s (a duplicate or an aborted record
        after the expected count would show); then stop. Everything read."""
        wait_for(f"{what} ({self.isolation}): {want} records", lambda: len(self.records), timeout=timeout,
                 until=lambda n: n >= want)

        def quiet() -> bool:
            n = len(self.records)
            time.sleep(3)
            return len(self.records) == n
        wait_for(f"{what}: no more records for 3 s", quiet, timeout=60, interval=0)
        self.stop()
        if self.errors:  # what the records show decides; these say why if they are wrong
            print(f"{what}: {len(self.errors)} consumer errors, e.g. {self.errors[:5]}")
        return list(self.records)

    def stop(self) -> None:
        if not self._stop.is_set():
            self._stop.set()
            self._thread.join(30)
            self._consumer.close()


def read_once(bootstrap: str, topic: str, isolation: str, want: int) -> list[tuple[int, int, int]]:
    """A fresh consumer of the whole output topic."""
    reader = OutputReader(bootstrap, topic, isolation)
    try:
        return reader.read(want, "a final read")
    finally:
        reader.stop()


def check_copy(records: list[tuple[int, int, int]], inputs: dict[int, list[int]], who: str) -> None:
    """`records` hold each input value exactly once, and each partition's in input order."""
    values = [v for _, _, v in records]
    want = sorted(v for vs in inputs.values() for v in vs)
    dups = sorted(v for v, n in Counter(values).items() if n > 1)
    assert not dups, f"{who}: {len(dups)} values read more than once, e.g. {dups[:5]}"
    missing, extra = sorted(set(want) - set(values)), sorted(set(values) - set(want))
    assert not missing and not extra, f"{who}: {len(missing)} missing (e.g. {missing[:5]}), {len(extra)} not in the input"
    for part in range(OUTPUT_PARTITIONS):
        got = [v for p, _, v in sorted(records) if p == part]
        assert got == sorted(got), f"{who}: output partition {part} out of input order"


def committed_share(copiers: list[Copier], inputs: dict[int, list[int]]) -> float:
    """How much of the input the copiers have committed (as their last status lines say)."""
    left = sum(len(inputs[c.partition]) if c.remaining() is None else c.remaining() for c in copiers)
    total = sum(len(v) for v in inputs.values())
    return 1.0 - left / total


def check_copiers_alive(copiers: list[Copier]) -> None:
    for c in copiers:
        rc = c.unexpected_exit()
        assert rc is None, f"copier {c.transactional_id} exited {rc} on its own\n{c.logs()}"


def bounce_brokers(cluster: Fleet, copiers: list[Copier], inputs: dict[int, list[int]], topics: list[str]) -> list[str]:
    """Each broker once, in turn, as the copy passes 15 %, 40 % and 65 %: kill -9 (then start once
    the others have dropped it, as Kafka's test waits out the session timeout), clean, kill -9.
    Each waits until the broker is back in every ISR of the two topics before the next."""
    log: list[str] = []
    for broker, threshold, hard in zip(sorted(cluster.brokers, key=lambda b: b.node_id), (0.15, 0.40, 0.65),
                                       (True, False, True)):
        def progress() -> float:
            check_copiers_alive(copiers)
            return committed_share(copiers, inputs)
        share = wait_for(f"the copy past {threshold:.0%} before bouncing broker {broker.node_id}", progress,
                         timeout=COPIER_PROGRESS_TIMEOUT,
                         until=lambda s: s >= threshold or all(c.done() for c in copiers))
        log.append(f"broker {broker.node_id} {'kill -9' if hard else 'clean'} bounce at {share:.0%} copied")
        if hard:
            broker.kill9()
            cluster.wait_formed(timeout=90)  # type: ignore[attr-defined]
            broker.start()
        else:
            broker.stop()
            broker.start()
        cluster.wait_formed(timeout=90)  # type: ignore[attr-defined]
        for topic, parts in zip(topics, (INPUT_PARTITIONS, OUTPUT_PARTITIONS)):
            wait_isr(cluster, topic, parts, ALL, timeout=120)  # type: ignore[arg-type]
    return log


def bounce_copiers(copiers: list[Copier]) -> list[str]:
    """Three rounds, as Kafka's test: each copier, once it has committed 20 % of what was left at
    its (re)start, is restarted; kill -9 and clean alternate, both in every round."""
    log: list[str] = []
    for round_ in range(3):
        for i, c in enumerate(copiers):
            def progress(c: Copier = c) -> float:
                check_copiers_alive(copiers)
                return c.progress_since_start()
            share = wait_for(f"{c.transactional_id} (round {round_ + 1}) 20 % further", progress,
                             timeout=COPIER_PROGRESS_TIMEOUT, until=lambda s: s >= 0.2)
            hard = (round_ + i) % 2 == 0
            log.append(f"{c.transactional_id} {'kill -9' if hard else 'clean'} restart at {share:.0%} of its start")
            c.restart(clean=not hard)
    return log


@pytest.mark.parametrize("bounce_target", ["brokers", "clients"])
def test_transactional_copy_with_bounces(cluster: Fleet, kafka_target: str, bounce_target: str,
                                         tmp_path: Path) -> None:
    records, txn_size = scale(kafka_target)
    input_topic = create_topic(cluster.brokers[0], INPUT_PARTITIONS, configs={"min.insync.replicas": "2"},
                               prefix="txsys-in")
    output_topic = create_topic(cluster.brokers[0], OUTPUT_PARTITIONS, configs={"min.insync.replicas": "2"},
                                prefix="txsys-out")
    for topic, parts in ((input_topic, INPUT_PARTITIONS), (output_topic, OUTPUT_PARTITIONS)):
        wait_isr(cluster, topic, parts, ALL)  # type: ignore[arg-type]
    bootstrap = all_bootstrap(cluster)
    inputs = seed(bootstrap, input_topic, records)

    copiers = [Copier(tmp_path / "copiers", bootstrap, transactional_id=f"copier-{p}-{input_topic}",
                      group=f"txsys-group-{input_topic}", input_topic=input_topic, partition=p,
                      output_topic=output_topic, transaction_size=txn_size,
                      transaction_timeout_ms=TRANSACTION_TIMEOUT_MS, use_group_metadata=(p == 0))
               for p in range(INPUT_PARTITIONS)]
    concurrent = OutputReader(bootstrap, output_topic)
    try:
        for c in copiers:
            c.start()
        if bounce_target == "brokers":
            bounces = bounce_brokers(cluster, copiers, inputs, [input_topic, output_topic])
        else:
            bounces = bounce_copiers(copiers)
        print("\n".join(bounces))

        def finished() -> list[str]:
            check_copiers_alive(copiers)
            return [c.transactional_id for c in copiers if not c.done()]
        wait_for("every copier to copy its partition and exit 0", finished, timeout=600, interval=1,
                 until=lambda left: not left)
        concurrently_read = concurrent.read(records, "the concurrent read_committed consumer")
    except BaseException:
        for c in copiers:
            print(c.logs())
        raise
    finally:
        concurrent.stop()
        for c in copiers:
            c.close()

    check_copy(read_once(bootstrap, output_topic, "read_committed", records), inputs, "the final read_committed read")
    check_copy(concurrently_read, inputs, "the concurrent read_committed consumer")
    everything = read_once(bootstrap, output_topic, "read_uncommitted", records)
    assert len(everything) > records, "no aborted transaction's records in the log: the random aborts did not happen"
