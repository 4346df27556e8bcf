"""Every client family's transactional flow (issue 19). confluent-kafka, kafka-python, aiokafka and
the Java client (kafka-clients 3.9, tests/java/client-check `transact`) each run the same plan on one
topic: a committed transaction, an aborted one, a committed one, an aborted one, each also sending
the group offset 10, 20, 30, 40 with the transaction. Then each family's consumer, read_committed,
returns exactly the committed records (none twice) and, read_uncommitted, the aborted ones too; each
family's group has offset 30 (the last committed transaction's), never an aborted one's.
Kafka's own TransactionalMessageCopier (kafka-clients 4.1) is the fifth producer, in
test_transactions_system.py. Lastly `kafka-transactions.sh list` and `describe` (Kafka's
TransactionsCommand, kafka-tools 4.1) show an open transaction, `describe-producers` its producer
on the partition with the transaction's first offset, and list shows it aborted after.

    pytest tests/e2e/test_transactions_clients.py [--kafka-target=apache]
"""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import threading
import time
from typing import Callable

import pytest

from tests.support import java_client
from flotilla.testenv.brokers import kafka_tools
from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess
from flotilla.testenv.waiting import wait_for

ck = pytest.importorskip("confluent_kafka")
kafka = pytest.importorskip("kafka")
aiokafka = pytest.importorskip("aiokafka")

pytestmark = [pytest.mark.timeout(600)]

PARTITIONS = 2
PLAN = [("commit", 4), ("abort", 3), ("commit", 2), ("abort", 2)]
FAMILIES = ["confluent", "kafka-python", "aiokafka", "java"]
COMMITTED_OFFSET = 30  # step 2, the last committed one (10 * (step + 1))


def planned(family: str) -> tuple[list[str], list[str]]:
    """(committed values, aborted values) the plan writes for one family (the Java tool's naming)."""
    committed, aborted = [], []
    for step, (result, count) in enumerate(PLAN):
        values = [f"{family}-{step}{result[0]}-{i}" for i in range(count)]
        (committed if result == "commit" else aborted).extend(values)
    return committed, aborted


# -- the producers -------------------------------------------------------------------------------

def produce_confluent(bootstrap: str, topic: str, tid: str, group: str) -> None:
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    meta = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        for step, (result, count) in enumerate(PLAN):
            p.begin_transaction()
            for i in range(count):
                p.produce(topic, f"confluent-{step}{result[0]}-{i}".encode(), partition=i % PARTITIONS)
            assert p.flush(30) == 0
            p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 10 * (step + 1))],
                                          meta.consumer_group_metadata(), 60)
            p.commit_transaction(60) if result == "commit" else p.abort_transaction(60)
    finally:
        meta.close()


def produce_kafka_python(bootstrap: str, topic: str, tid: str, group: str) -> None:
    from kafka.structs import OffsetAndMetadata, TopicPartition

    p = kafka.KafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid, transaction_timeout_ms=60000)
    try:
        p.init_transactions()
        for step, (result, count) in enumerate(PLAN):
            p.begin_transaction()
            for i in range(count):
                p.send(topic, f"kafka-python-{step}{result[0]}-{i}".encode(), partition=i % PARTITIONS).get(30)
            p.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(10 * (step + 1), "", -1)},
                                          group)
            p.commit_transaction() if result == "commit" else p.abort_transaction()
    finally:
        p.close(timeout=30)


def produce_aiokafka(bootstrap: str, topic: str, tid: str, group: str) -> None:
    from aiokafka.structs import TopicPartition

    async def run() -> None:
        p = aiokafka.AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=tid,
                                      transaction_timeout_ms=60000)
        await p.start()
        try:
            for step, (result, count) in enumerate(PLAN):
                await p.begin_transaction()
                for i in range(count):
                    await p.send_and_wait(topic, f"aiokafka-{step}{result[0]}-{i}".encode(), partition=i % PARTITIONS)
                await p.send_offsets_to_transaction({TopicPartition(topic, 0): 10 * (step + 1)}, group)
                await (p.commit_transaction() if result == "commit" else p.abort_transaction())
        finally:
            await p.stop()
    asyncio.run(run())


def produce_java(bootstrap: str, topic: str, tid: str, group: str) -> None:
    plan = ",".join(f"{result}:{count}" for result, count in PLAN)
    # The tool names its values after the transactional id: give it the family's name as id prefix.
    out = java_client.run("transact", "--bootstrap", bootstrap, "--topic", topic, "--transactional-id", tid,
                          "--plan", plan, "--partitions", str(PARTITIONS), "--offsets-group", group, timeout=180)
    steps = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert [s["result"] for s in steps] == [r for r, _ in PLAN], out.stdout


PRODUCERS: dict[str, Callable[[str, str, str, str], None]] = {
    "confluent": produce_confluent, "kafka-python": produce_kafka_python, "aiokafka": produce_aiokafka,
    "java": produce_java}


# -- the consumers -------------------------------------------------------------------------------

def settle(got: Callable[[], int], want: int, what: str) -> None:
    """At least `want` records, then none more for 3 s (a duplicate or a leaked aborted record
    after the expected count would show)."""
    wait_for(f"{what}: {want} records", got, timeout=90, until=lambda n: n >= want)

    def quiet() -> bool:
        n = got()
        time.sleep(3)
        return got() == n
    wait_for(f"{what}: no more records for 3 s", quiet, timeout=60, interval=0)


def consume_confluent(bootstrap: str, topic: str, isolation: str, want: int, partitions: int = PARTITIONS) -> list[str]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": kafka_wire.unique_topic("rd"),
                     "isolation.level": isolation, "enable.auto.commit": False})
    c.assign([ck.TopicPartition(topic, p, ck.OFFSET_BEGINNING) for p in range(partitions)])
    got: list[str] = []

    def more() -> int:
        for m in c.consume(100, 0.3):
            if m.error() is None:
                got.append(m.value().decode())
        return len(got)
    try:
        settle(more, want, f"confluent-kafka {isolation}")
    finally:
        c.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, isolation: str, want: int) -> list[str]:
    from kafka.structs import TopicPartition

    c = kafka.KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                            auto_offset_reset="earliest")
    c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
    c.seek_to_beginning()
    got: list[str] = []

    def more() -> int:
        for records in c.poll(300).values():
            got.extend(r.value.decode() for r in records)
        return len(got)
    try:
        settle(more, want, f"kafka-python {isolation}")
    finally:
        c.close()
    return got


def consume_aiokafka(bootstrap: str, topic: str, isolation: str, want: int) -> list[str]:
    from aiokafka.structs import TopicPartition

    got: list[str] = []
    box: queue.Queue = queue.Queue()

    async def run() -> None:
        c = aiokafka.AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation,
                                      enable_auto_commit=False, auto_offset_reset="earliest")
        await c.start()
        try:
            c.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
            await c.seek_to_beginning()
            while box.empty():
                for records in (await c.getmany(timeout_ms=300)).values():
                    got.extend(r.value.decode() for r in records)
        finally:
            await c.stop()
    t = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    t.start()
    try:
        settle(lambda: len(got), want, f"aiokafka {isolation}")
    finally:
        box.put("stop")
        t.join(30)
    return got


def consume_java(bootstrap: str, topic: str, isolation: str, want: int) -> list[str]:
    proc = subprocess.Popen(java_client.command("consume", "--bootstrap", bootstrap, "--topic", topic,
                                                "--isolation", isolation, "--offset-reset", "earliest",
                                                "--timeout-ms", "150000"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got, reader = java_client.collect_records(proc)
    try:
        settle(lambda: len(got), want, f"Java {isolation}")
    finally:
        assert proc.stdin is not None
        proc.stdin.write("exit\n")
        proc.stdin.close()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        reader.join(10)
    return got


CONSUMERS: dict[str, Callable[[str, str, str, int], list[str]]] = {
    "confluent": consume_confluent, "kafka-python": consume_kafka_python, "aiokafka": consume_aiokafka,
    "java": consume_java}


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return c.committed([ck.TopicPartition(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()


@pytest.fixture(scope="module")
def written(shared_broker: ServerProcess) -> tuple[str, str, dict[str, str]]:
    """The topic every family's producer wrote its plan to; (bootstrap, topic, family -> group)."""
    try:
        java_client.require()
    except java_client.JavaClientMissing as e:
        pytest.fail(str(e))
    bootstrap = shared_broker.bootstrap
    topic = kafka_wire.unique_topic("txfam")
    with kafka_wire.connect(bootstrap) as conn:
        assert int(conn.create_topic(topic, PARTITIONS)) == 0
        conn.wait_for_leaders(topic, PARTITIONS)
    groups = {}
    for family, produce in PRODUCERS.items():
        groups[family] = kafka_wire.unique_topic(f"txfam-{family}-g")
        # Java's values are named after its transactional id: the family's name.
        tid = family if family == "java" else kafka_wire.unique_topic(f"txfam-{family}")
        produce(bootstrap, topic, tid, groups[family])
    return bootstrap, topic, groups


@pytest.mark.parametrize("family", FAMILIES)
def test_read_committed_returns_the_committed_records_only(written, family: str) -> None:
    bootstrap, topic, _ = written
    want = sorted(v for f in FAMILIES for v in planned(f)[0])
    assert sorted(CONSUMERS[family](bootstrap, topic, "read_committed", len(want))) == want


@pytest.mark.parametrize("family", FAMILIES)
def test_read_uncommitted_returns_the_aborted_records_too(written, family: str) -> None:
    bootstrap, topic, _ = written
    want = sorted(v for f in FAMILIES for part in planned(f) for v in part)
    assert sorted(CONSUMERS[family](bootstrap, topic, "read_uncommitted", len(want))) == want


@pytest.mark.parametrize("family", FAMILIES)
def test_offsets_sent_with_a_transaction_commit_only_with_it(written, family: str) -> None:
    bootstrap, topic, groups = written
    assert committed_offset(bootstrap, groups[family], topic) == COMMITTED_OFFSET


def transactions_command(bootstrap: str, *args: str) -> list[list[str]]:
    """Kafka's kafka-transactions.sh (TransactionsCommand): its table, rows split on whitespace."""
    out = subprocess.run(kafka_tools.command("TransactionsCommand", "--bootstrap-server", bootstrap, *args),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, f"kafka-transactions {' '.join(args)} exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    return [line.split() for line in out.stdout.splitlines() if line.strip()]


def test_kafka_transactions_lists_and_describes_an_open_transaction(shared_broker: ServerProcess) -> None:
    try:
        kafka_tools.ensure_libs()
    except kafka_tools.ToolsMissing as e:
        pytest.fail(str(e))
    bootstrap = shared_broker.bootstrap
    topic = kafka_wire.unique_topic("txtool")
    tid = kafka_wire.unique_topic("txtool-id")
    with kafka_wire.connect(bootstrap) as conn:
        assert int(conn.create_topic(topic, PARTITIONS)) == 0
        conn.wait_for_leaders(topic, PARTITIONS)
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": 120000})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, b"open", partition=1)
    assert p.flush(30) == 0  # the partition is in the transaction now

    rows = transactions_command(bootstrap, "list")
    assert rows[0][:4] == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows[0]
    mine = [r for r in rows if r[0] == tid]
    assert len(mine) == 1 and mine[0][3] == "Ongoing", rows

    rows = transactions_command(bootstrap, "describe", "--transactional-id", tid)
    header, values = rows[0], rows[1]
    described = dict(zip(header, values))
    assert (described["TransactionalId"], described["TransactionState"]) == (tid, "Ongoing"), rows
    assert described["ProducerId"] == mine[0][2]
    assert described["TransactionTimeoutMs"] == "120000"
    assert described["TopicPartitions"].split(",") == [f"{topic}-1"], f"the transaction's partitions: {rows}"

    rows = transactions_command(bootstrap, "describe-producers", "--topic", topic, "--partition", "1")
    producers = [dict(zip(rows[0], r)) for r in rows[1:]]
    assert [(d["ProducerId"], d["CurrentTransactionStartOffset"], d["LastSequence"]) for d in producers] == [
        (mine[0][2], "0", "0")], rows

    p.abort_transaction(60)
    rows = transactions_command(bootstrap, "list")
    assert [r[3] for r in rows if r[0] == tid] == ["CompleteAbort"], rows


# A transactional producer (confluent-kafka) that opens a transaction on partition 0, says so, and
# waits to be killed.
HOLDER = """
import sys, time
import confluent_kafka as ck
bootstrap, tid, topic, timeout_ms = sys.argv[1:5]
p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": tid, "transaction.timeout.ms": int(timeout_ms)})
p.init_transactions(60)
p.begin_transaction()
for i in range(3):
    p.produce(topic, b"doomed-%d" % i, partition=0)
assert p.flush(30) == 0
print("open", flush=True)
time.sleep(600)
"""


def test_a_producer_killed_mid_transaction_holds_the_lso_until_its_timeout(shared_broker: ServerProcess) -> None:
    """kill -9 of a producer with an open transaction: the partition's last stable offset stays
    at the transaction's first offset while the coordinator still has it Ongoing, then, once the
    transaction timeout has aborted it, moves to the end (past the ABORT marker); read_committed
    consumers never see its records."""
    import sys

    from tests.e2e.test_transaction_coordinator import describe, find_coordinator

    bootstrap = shared_broker.bootstrap
    topic, tid = kafka_wire.unique_topic("txkill"), kafka_wire.unique_topic("txkill-id")
    with kafka_wire.connect(bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        conn.wait_for_leaders(topic, 1)
    before = ck.Producer({"bootstrap.servers": bootstrap})
    before.produce(topic, b"before", partition=0)
    assert before.flush(30) == 0
    # 30 s: far longer than the checks below take, so "still Ongoing" is their premise, not a race.
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, bootstrap, tid, topic, "30000"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None
        said = holder.stdout.readline().strip()
    finally:
        holder.kill()
        holder.wait(30)
    assert said == "open", f"the holding producer did not open its transaction: {holder.stderr.read()[-3000:]}"
    with kafka_wire.connect(bootstrap) as conn:
        find_coordinator(conn, tid)
        lso, hw = conn.list_offsets(topic, 0, -1, 1), conn.list_offsets(topic, 0)
        assert describe(conn, tid).transaction_state == "Ongoing"
        assert (lso, hw) == (1, 4), "the open transaction (offsets 1-3) does not hold the last stable offset"
        state = wait_for("the coordinator to abort the timed-out transaction", lambda: describe(conn, tid),
                         timeout=120, until=lambda d: d.transaction_state == "CompleteAbort")
        assert int(state.producer_epoch) >= 1
        wait_for("the last stable offset past the ABORT marker",
                 lambda: (conn.list_offsets(topic, 0, -1, 1), conn.list_offsets(topic, 0)), timeout=60,
                 until=lambda v: v[0] == v[1] >= 5)
    assert consume_confluent(bootstrap, topic, "read_committed", 1, partitions=1) == ["before"]
