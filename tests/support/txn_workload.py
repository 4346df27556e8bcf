"""The transactional half of the partition tests' workload (issue 35), in Jepsen's spirit: a
copier in a consumer group reads the input topic with read_committed and copies each poll to the
output topic in one transaction, committing its consumer offsets in the same transaction
(send_offsets_to_transaction) and aborting every third transaction on purpose; a read_committed
reader of the output runs throughout, and a watcher samples the group's committed offsets.

What the checker then asks (`check`):
- no read_committed reader ever saw a record of an aborted transaction (aborted reads);
- every record of a committed transaction is in the final log at the offset its delivery report
  gave, once (lost, moved or duplicated);
- every record the reader was given is still at its offset at the end (reads of truncated data);
- the group's committed offsets never went backwards;
- no input record was copied by two committed transactions (exactly once).

A transaction whose end the copier never learned (its commit timed out or the producer failed
fatally) has an unknown outcome: its records may or may not be in the log, and are checked only
for not moving. The copier then starts again from the group's committed offsets with a new
producer under the same transactional.id, which fences the old one (KIP-98).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

ABORT_EVERY = 3  # every third transaction is aborted on purpose
TXN_TIMEOUT_S = 30.0


def _label(value: bytes) -> tuple[str, bytes]:
    """An output record's value is b"<transaction label>|<input value>"."""
    label, _, source = value.partition(b"|")
    return label.decode(), source


@dataclass
class CopierOutcome:
    """What the copier knows of its transactions' ends."""

    committed: list[tuple[int, int, bytes]] = field(default_factory=list)  # (partition, offset, value)
    committed_labels: set[str] = field(default_factory=set)
    aborted_labels: set[str] = field(default_factory=set)
    unknown_labels: set[str] = field(default_factory=set)
    fatal_errors: list[str] = field(default_factory=list)


class TxnCopier(threading.Thread):
    """Consume-transform-produce in a loop, as a Kafka Streams task does with exactly-once."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, transactional_id: str) -> None:
        super().__init__(daemon=True, name=f"txn-copier-{transactional_id}")
        self.bootstrap, self.source, self.sink = bootstrap, source, sink
        self.group, self.transactional_id = group, transactional_id
        self.outcome = CopierOutcome()
        self.errors: list[str] = []
        self.stop = threading.Event()
        self._n = 0
        self._delivered: list[tuple[int, int, bytes]] = []

    def _producer(self, old: Producer | None = None) -> Producer:
        """A producer with its transactions initialised (fencing any earlier one of this
        transactional.id); `old`, a producer that failed fatally, is dropped first."""
        if old is not None:
            try:
                old.flush(1)
            except Exception:  # a fatal producer may refuse even this
                pass
            time.sleep(0.5)  # a fatal error would repeat at once
        p = Producer({"bootstrap.servers": self.bootstrap, "transactional.id": self.transactional_id,
                      "transaction.timeout.ms": 60000, "message.timeout.ms": 55000, "request.timeout.ms": 10000,
                      "retry.backoff.ms": 100, "topic.metadata.refresh.interval.ms": 1000, "linger.ms": 5})
        while not self.stop.is_set():
            try:
                p.init_transactions(TXN_TIMEOUT_S)
                break
            except KafkaException as e:
                self.errors.append(f"init_transactions: {e}")
                if e.args[0].fatal():
                    return self._producer(p)
        return p

    def _report(self, err, msg) -> None:
        if err is None:
            self._delivered.append((msg.partition(), msg.offset(), msg.value()))

    def run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group,
                             "isolation.level": "read_committed", "enable.auto.commit": False,
                             "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
                             "topic.metadata.refresh.interval.ms": 1000})
        consumer.subscribe([self.source])
        producer = self._producer()
        try:
            while not self.stop.is_set():
                msgs = [m for m in consumer.consume(200, timeout=0.5) if m.error() is None]
                if msgs:
                    producer = self._transaction(producer, consumer, msgs)
            self._settle(producer)
        finally:
            consumer.close()

    def _transaction(self, producer: Producer, consumer: Consumer, msgs) -> Producer:
        """One transaction for one poll; returns the producer to go on with (a new one after a
        fatal error). After any end but a commit the consumer rewinds to the committed offsets."""
        self._n += 1
        label = f"{self.transactional_id}-{self._n}"
        self._delivered = []
        abort = self._n % ABORT_EVERY == 0
        stage = "begin"
        try:
            producer.begin_transaction()
            stage = "produce"
            for m in msgs:
                while True:
                    try:
                        producer.produce(self.sink, value=label.encode() + b"|" + m.value(), partition=m.partition(),
                                         on_delivery=self._report)
                        break
                    except BufferError:
                        producer.poll(0.1)
            stage = "send offsets"
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), TXN_TIMEOUT_S)
            if abort:
                stage = "abort"
                producer.abort_transaction(TXN_TIMEOUT_S)
                self.outcome.aborted_labels.add(label)
            else:
                stage = "commit"
                self._commit(producer)
                self.outcome.committed_labels.add(label)
                self.outcome.committed.extend(self._delivered)
                return producer
        except KafkaException as e:
            producer = self._after_error(producer, label, stage, e.args[0])
        self._rewind(consumer)
        return producer

    def _commit(self, producer: Producer) -> None:
        """commit_transaction, retried while the error says retrying is safe."""
        while True:
            try:
                producer.commit_transaction(TXN_TIMEOUT_S)
                return
            except KafkaException as e:
                if not e.args[0].retriable() or self.stop.is_set():
                    raise
                self.errors.append(f"commit (retried): {e}")

    def _after_error(self, producer: Producer, label: str, stage: str, err: KafkaError) -> Producer:
        self.errors.append(f"{label} {stage}: {err}")
        if err.txn_requires_abort():
            try:
                producer.abort_transaction(TXN_TIMEOUT_S)
                self.outcome.aborted_labels.add(label)
                return producer
            except KafkaException as e:
                err = e.args[0]
                self.errors.append(f"{label} abort: {err}")
        # A commit or abort that did not answer, or a fatal producer: the end is unknown.
        self.outcome.unknown_labels.add(label)
        if err.fatal() or not err.retriable():
            self.outcome.fatal_errors.append(f"{label} {stage}: {err}")
            producer = self._producer(producer)
        else:
            try:
                producer.abort_transaction(TXN_TIMEOUT_S)
            except KafkaException as e:
                self.errors.append(f"{label} abort after {stage}: {e}")
        return producer

    def _rewind(self, consumer: Consumer) -> None:
        """Back to the group's committed offsets: what was not committed is copied again."""
        try:
            assigned = consumer.assignment()
            for tp in consumer.committed(assigned, timeout=TXN_TIMEOUT_S):
                consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
        except KafkaException as e:
            self.errors.append(f"rewind: {e}")

    def _settle(self, producer: Producer) -> None:
        try:
            producer.flush(30)
        except Exception as e:
            self.errors.append(f"flush at stop: {e}")

    def transactions(self) -> int:
        return len(self.outcome.committed_labels) + len(self.outcome.aborted_labels)

    def progress(self) -> dict:
        """What a wait on the copier shows when it times out: the count of ended transactions,
        the last errors, and where the copier's thread is (its stack)."""
        frame = sys._current_frames().get(self.ident or -1)
        stack = "".join(traceback.format_stack(frame)[-4:]) if frame is not None else "(not running)"
        return {"ended": self.transactions(), "unknown": len(self.outcome.unknown_labels),
                "errors": self.errors[-4:], "where": stack}


class LogReader(threading.Thread):
    """A reader of every partition from the start for as long as it runs, with `isolation`:
    (partition, offset) -> value of everything it was given, and every offset it saw hold two
    different records. The fault tests' reader (read_uncommitted) and the copier's output reader
    (read_committed) both."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str = "read_committed") -> None:
        super().__init__(daemon=True, name=f"{isolation}-{topic}")
        self.bootstrap, self.topic, self.partitions, self.isolation = bootstrap, topic, partitions, isolation
        self.seen: dict[tuple[int, int], bytes] = {}
        self.conflicts: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "log-reader-unused",
                      "enable.auto.commit": False, "auto.offset.reset": "earliest",
                      "isolation.level": self.isolation, "topic.metadata.refresh.interval.ms": 1000})
        try:
            c.assign([TopicPartition(self.topic, p, 0) for p in range(self.partitions)])
            while not self.stop.is_set():
                m = c.poll(0.2)
                if m is None or m.error():
                    continue
                key = (m.partition(), m.offset())
                if key in self.seen and self.seen[key] != m.value():
                    self.conflicts.append(f"{key}: {self.seen[key]!r} then {m.value()!r}")
                self.seen[key] = m.value()
        finally:
            c.close()


class OffsetsWatcher(threading.Thread):
    """Samples the group's committed offsets of the input every half second."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        super().__init__(daemon=True, name=f"offsets-{group}")
        self.bootstrap, self.group, self.topic, self.partitions = bootstrap, group, topic, partitions
        self.samples: list[dict[int, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "enable.auto.commit": False})
        try:
            while not self.stop.wait(0.5):
                try:
                    got = c.committed([TopicPartition(self.topic, p) for p in range(self.partitions)], timeout=5)
                except KafkaException:
                    continue
                self.samples.append({tp.partition: tp.offset for tp in got if tp.offset >= 0})
        finally:
            c.close()

    def went_backwards(self) -> list[str]:
        high: dict[int, int] = {}
        back = []
        for i, sample in enumerate(self.samples):
            for p, offset in sample.items():
                if offset < high.get(p, -1):
                    back.append(f"partition {p}: {high[p]} then {offset} (sample {i})")
                high[p] = max(high.get(p, -1), offset)
        return back


def read_committed_log(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> dict[tuple[int, int], bytes]:
    """(partition, offset) -> value of every committed record, read with read_committed up to
    each partition's high watermark (the copier has ended every transaction by then)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "final-unused", "enable.auto.commit": False,
                  "isolation.level": "read_committed"})
    out: dict[tuple[int, int], bytes] = {}
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {tp.partition: c.get_watermark_offsets(tp, timeout=30)[1] for tp in tps}
        c.assign(tps)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            positions = {tp.partition: tp.offset for tp in c.position(tps)}
            if all(positions[p] >= end for p, end in ends.items()):
                break
            for m in c.consume(1000, timeout=0.5):
                if m.error() is None:
                    out[(m.partition(), m.offset())] = m.value()
        else:
            raise AssertionError(f"{topic}: read_committed did not reach the high watermarks {ends} "
                                 f"in {timeout}s (at {positions}): a transaction left open?")
    finally:
        c.close()
    return out


@dataclass
class TxnWorkload:
    """The copier, the read_committed reader of its output and the offsets watcher, together."""

    copier: TxnCopier
    reader: LogReader
    watcher: OffsetsWatcher

    @classmethod
    def start(cls, bootstrap: str, source: str, sink: str, partitions: int) -> "TxnWorkload":
        group = f"{sink}-copier"
        w = cls(TxnCopier(bootstrap, source, sink, group, f"{sink}-txn"), LogReader(bootstrap, sink, partitions),
                OffsetsWatcher(bootstrap, group, source, partitions))
        for t in (w.copier, w.reader, w.watcher):
            t.start()
        return w

    def stop(self) -> None:
        self.copier.stop.set()
        self.copier.join(180)
        for t in (self.reader, self.watcher):
            t.stop.set()
            t.join(30)

    def check(self, final: dict[tuple[int, int], bytes]) -> str:
        """The checker (module docstring); returns a one-line summary of what it checked."""
        out = self.copier.outcome
        assert not self.copier.is_alive(), "the copier did not stop"
        assert out.committed_labels, f"no transaction committed; copier errors: {self.copier.errors[:5]}"
        assert out.aborted_labels, "no transaction aborted: the aborted-read check had nothing to check"
        aborted_reads = {k: v for k, v in self.reader.seen.items() if _label(v)[0] in out.aborted_labels}
        assert not aborted_reads, f"read_committed saw records of aborted transactions: {sorted(aborted_reads.items())[:5]}"
        assert not [v for v in final.values() if _label(v)[0] in out.aborted_labels], \
            "the final read_committed log holds records of aborted transactions"
        misplaced = [(p, o, v, final.get((p, o))) for p, o, v in out.committed if final.get((p, o)) != v]
        assert not misplaced, f"{len(misplaced)} records of committed transactions not at their offsets: {misplaced[:5]}"
        assert not self.reader.conflicts, f"an offset held two different records: {self.reader.conflicts[:5]}"
        truncated = {k: (v, final.get(k)) for k, v in self.reader.seen.items() if final.get(k) != v}
        assert not truncated, f"read_committed read records no longer at their offsets: {sorted(truncated.items())[:5]}"
        assert self.reader.seen, "the read_committed reader read nothing"
        back = self.watcher.went_backwards()
        assert not back, f"the group's committed offsets went backwards: {back[:5]}"
        assert self.watcher.samples, "the offsets watcher sampled nothing"
        copies = Counter(_label(v)[1] for v in final.values())
        twice = [source for source, n in copies.items() if n > 1]
        assert not twice, f"{len(twice)} input records copied by two committed transactions: {twice[:5]}"
        return (f"{len(out.committed_labels)} transactions committed, {len(out.aborted_labels)} aborted, "
                f"{len(out.unknown_labels)} unknown; {len(final)} committed copies, 0 lost, 0 moved, 0 copied twice; "
                f"{len(self.reader.seen)} read_committed reads, 0 aborted reads, 0 reads of truncated data; "
                f"{len(self.watcher.samples)} offset samples, never backwards")
