"""CatchUpConsumer: a confluent-kafka Consumer with KIP-333's parallel catch-up mode.

With `enable.parallel.rebalance` false (the default) it is a plain `confluent_kafka.Consumer`:
every call goes straight through. With it true, each time the group gives this member a
partition, the partition's committed offset and commit metadata are read back; the gap
`[committed, log end)` becomes a range token (flotilla.catchup.ranges), the primary consumer starts
at the log end, and a second consumer (the catch-up worker: `assign()` only, never in the group,
never committing) reads the open ranges beside it. Both deliver through `poll()`.

All commits go through the primary, one record per partition carrying both the primary's offset
and the open ranges (with the worker's progress) in its metadata, so a token is durable in the
very write that moves the primary past it, and a member that takes the partition over in a
rebalance reads the ranges with the offset. Nothing is committed that the application did not
commit. The protocol is librdkafka's throughout.

Asynchronous commits are coalesced: while one is in flight (sent, its on_commit not yet seen),
further asynchronous commits only update the state, and the partitions' newest state goes out in
one commit when the answer comes. A coordinator answers one connection's commits in order, so
without this a consumer that commits every record queues commits faster than a replicated offsets
topic can take them, and a kill loses every queued one (docs/catch-up-consumer.md).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any, Callable, Iterable

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, Message, TopicPartition

from flotilla.catchup.progress import Progress, progress_line
from flotilla.catchup.ranges import PartitionRanges, Range

MODE_KEY = "enable.parallel.rebalance"
TP = tuple[str, int]
# librdkafka keys that belong to the group member only, not to the worker
_MEMBER_ONLY = ("group.instance.id", "partition.assignment.strategy", "group.protocol",
                "group.remote.assignor", "on_commit", "enable.auto.commit",
                "auto.commit.interval.ms", "enable.auto.offset.store")
_TRUE = {"true", "1", "yes"}
# with the mode off these are the plain consumer's methods, bound on the instance
_PLAIN_BOUND = ("poll", "consume", "commit", "committed", "position", "pause", "resume", "close")
#: an asynchronous commit whose answer has not come after this long no longer holds others back
COMMIT_STALE_S = 10.0
#: records the catch-up worker hands over per librdkafka call (consume()), delivered one by one
WORKER_BATCH = 500


def _flag(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in _TRUE | {"false", "0", "no"}:
        return value.lower() in _TRUE
    raise ValueError(f"{MODE_KEY} must be true or false, not {value!r}")


class CatchUpConsumer:
    """`confluent_kafka.Consumer` plus KIP-333's parallel catch-up mode (see module docstring)."""

    def __init__(self, config: dict[str, Any]) -> None:
        conf = dict(config)
        self._parallel = _flag(conf.pop(MODE_KEY, False))
        self.progress = Progress()
        if not self._parallel:
            self._primary = Consumer(conf)
            # The plain consumer's own methods on the instance: calls cost exactly what they cost on
            # a plain consumer (no Python frame of ours in between) and behave the same.
            for name in _PLAIN_BOUND:
                setattr(self, name, getattr(self._primary, name))
            return
        if "group.id" not in conf:
            raise ValueError(f"{MODE_KEY}=true needs a group.id: ranges live in the group's commits")
        self._auto_commit = _flag(str(conf.get("enable.auto.commit", "true")))
        self._auto_commit_s = int(conf.get("auto.commit.interval.ms", 5000)) / 1000.0
        self._next_auto_commit = time.monotonic() + self._auto_commit_s
        self._user_on_commit: Callable | None = conf.get("on_commit")
        member = dict(conf, **{"enable.auto.commit": False, "on_commit": self._on_commit})
        self._worker_conf = {k: v for k, v in conf.items() if k not in _MEMBER_ONLY}
        self._worker_conf.update({
            "group.id": f"{conf['group.id']}.catchup",  # never joined, never committed
            "enable.auto.commit": False,
            "client.id": f"{conf.get('client.id', 'rdkafka')}-catchup",
        })
        self._primary = Consumer(member)
        self._worker: Consumer | None = None
        self._worker_closed = False
        self._states: dict[TP, PartitionRanges] = {}
        self._owned: set[TP] = set()
        self._paused: set[TP] = set()
        # what the worker is reading: partition -> (range, next offset to deliver)
        self._reading: dict[TP, tuple[Range, int]] = {}
        # ranges the worker read to the end: (partition, range start) -> offset after its last record
        self._read_through: dict[tuple[TP, int], int] = {}
        # next offset after the last record delivered, per partition, by the primary / the worker
        self._delivered: dict[TP, int] = {}
        self._delivered_gap: dict[TP, int] = {}
        self._turn = 0
        # records the worker fetched and this library has not delivered yet (its librdkafka
        # position is past them); those of partitions paused after the fetch wait in _held
        self._worker_buffer: deque[Message] = deque()
        self._held: list[Message] = []
        # the asynchronous commit in flight (when it was sent), and partitions whose newest state
        # waits for its answer
        self._in_flight_since: float | None = None
        self._queued: list[TP] = []
        #: asynchronous commits folded into a later one instead of being sent on their own
        self.commits_coalesced = 0
        self._callback_error: Exception | None = None
        #: which worker delivered the last record poll() returned: "primary" or "catchup"
        self.last_source: str | None = None
        self._user_cb: dict[str, Callable | None] = {}

    # -- mode off: a plain consumer ---------------------------------------------------------------
    def __getattr__(self, name: str) -> Any:
        # whatever this class does not define acts on the primary, as on a plain consumer
        return getattr(self.__dict__["_primary"], name)

    # -- group membership ---------------------------------------------------------------------------
    def subscribe(self, topics: list[str], on_assign: Callable | None = None,
                  on_revoke: Callable | None = None, on_lost: Callable | None = None) -> None:
        if not self._parallel:
            kw = {k: v for k, v in (("on_assign", on_assign), ("on_revoke", on_revoke),
                                     ("on_lost", on_lost)) if v is not None}
            return self._primary.subscribe(topics, **kw)
        self._user_cb = {"assign": on_assign, "revoke": on_revoke, "lost": on_lost}
        self._primary.subscribe(topics, on_assign=self._guard(self._on_assign),
                                on_revoke=self._guard(self._on_revoke), on_lost=self._guard(self._on_lost))

    def _guard(self, callback: Callable) -> Callable:
        """librdkafka swallows what a rebalance callback raises into a SystemError: keep the
        exception and raise it from poll() instead, so bad input fails clearly."""
        def run(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            try:
                callback(consumer, partitions)
            except Exception as exc:  # noqa: BLE001 - re-raised by poll()
                self._callback_error = exc
        return run

    def _raise_callback_error(self) -> None:
        exc, self._callback_error = self._callback_error, None
        if exc is not None:
            raise exc

    def _on_assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        """A partition given to this member is a recovery: its gap becomes a range token."""
        committed = consumer.committed(partitions, timeout=30) if partitions else []
        tokens = []
        for tp in committed:
            key = (tp.topic, tp.partition)
            self._owned.add(key)
            if tp.offset < 0:
                continue  # never committed: auto.offset.reset decides, as for a plain consumer
            state = PartitionRanges.from_commit(tp.offset, tp.metadata)
            _lo, hi = consumer.get_watermark_offsets(tp, timeout=30, cached=False)
            before = state.token()
            tp.offset = state.recover(hi)
            self._states[key] = state
            self._delivered.pop(key, None)
            self._forget_reads(key)
            if state.token() != before or tp.offset != state.committed_primary:
                tokens.append(self._commit_record(key))
        if tokens:
            # the new range is durable before the primary delivers (let alone commits) past it
            consumer.commit(offsets=tokens, asynchronous=False)
        consumer.assign(committed)
        self._sync_worker()
        if self._user_cb.get("assign"):
            self._user_cb["assign"](self, committed)

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._user_cb.get("revoke"):
            self._user_cb["revoke"](self, partitions)
        if self._auto_commit:
            self._commit_delivered(asynchronous=False)
        self._flush_queued()  # the newest state of partitions about to go, before they go
        self._drop(partitions)
        consumer.unassign()

    def _on_lost(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if self._user_cb.get("lost"):
            self._user_cb["lost"](self, partitions)
        self._drop(partitions)
        consumer.unassign()

    def _drop(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            self._owned.discard(key)
            self._states.pop(key, None)
            self._delivered.pop(key, None)
            self._reading.pop(key, None)
            self._delivered_gap.pop(key, None)
            self._paused.discard(key)
            self._forget_reads(key)
            if key in self._queued:
                self._queued.remove(key)
        self._sync_worker()

    def _forget_reads(self, key: TP) -> None:
        for k in [k for k in self._read_through if k[0] == key]:
            del self._read_through[k]

    # -- the catch-up worker ------------------------------------------------------------------------
    def _sync_worker(self) -> None:
        """Point the worker at the first unread open range of every owned partition."""
        want: dict[TP, tuple[Range, int]] = {}
        for key, state in self._states.items():
            cur = self._reading.get(key)
            at = cur[1] if cur else 0
            for r in state.ranges:
                if r.end > at and (key, r.start) not in self._read_through:
                    want[key] = (r, max(r.next, at))
                    break
        if want == self._reading:
            return
        self._reading = want
        if not want and self._worker is None:
            return
        worker = self._ensure_worker()
        # A new assignment restarts each partition at its next undelivered offset: the records
        # buffered beyond it will be fetched again.
        self._worker_buffer.clear()
        self._held.clear()
        worker.assign([TopicPartition(t, p, pos) for (t, p), (_r, pos) in want.items()])
        paused = [TopicPartition(t, p) for (t, p) in want if (t, p) in self._paused]
        if paused:
            worker.pause(paused)

    def _ensure_worker(self) -> Consumer:
        if self._worker is None:
            # created at the first gap, then kept on standby for the next (the KIP's design)
            self._worker = Consumer(self._worker_conf)
        return self._worker

    def _from_worker(self, msg: Message) -> Message | None:
        """Keep a worker record inside its range; move on when the range is read."""
        key = (msg.topic(), msg.partition())
        cur = self._reading.get(key)
        if cur is None:
            return None  # a partition this member gave away, or a range already read
        r, at = cur
        o = msg.offset()
        if o < at:
            return None  # fetched before a re-assignment
        if o >= r.end:
            self._read_through[(key, r.start)] = at
            self._settle_holes(key)
            self._sync_worker()
            return None
        self._reading[key] = (r, o + 1)
        if o + 1 >= r.end:
            self._read_through[(key, r.start)] = r.end
            self._sync_worker()
        return msg

    # -- records --------------------------------------------------------------------------------------
    def poll(self, timeout: float | None = None) -> Message | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        self._maybe_auto_commit()
        while True:
            self._turn ^= 1
            sources = ["primary", "catchup"] if self._turn else ["catchup", "primary"]
            for source in sources:
                msg = self._poll_one(source)
                if msg is not None:
                    return msg
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            msg = self._primary.poll(0.02 if left is None else min(0.02, left))
            self._raise_callback_error()
            if msg is not None:
                return self._accept("primary", msg)

    def consume(self, num_messages: int = 1, timeout: float | None = None) -> list[Message]:
        out: list[Message] = []
        deadline = None if timeout is None else time.monotonic() + timeout
        while len(out) < num_messages:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            msg = self.poll(left if out == [] else 0)
            if msg is None:
                break
            out.append(msg)
        return out

    def _poll_one(self, source: str) -> Message | None:
        if source == "catchup":
            return self._from_worker_buffer()
        msg = self._primary.poll(0)
        self._raise_callback_error()
        return None if msg is None else self._accept(source, msg)

    def _from_worker_buffer(self) -> Message | None:
        """The worker's next record: its reads come WORKER_BATCH at a time (one librdkafka call
        instead of one per record), then go through the range checks one by one."""
        if self._worker is None or not self._reading:
            return None
        while True:
            if not self._worker_buffer:
                batch = self._worker.consume(num_messages=WORKER_BATCH, timeout=0)
                self._raise_callback_error()
                if not batch:
                    return None
                self._worker_buffer.extend(batch)
            msg = self._worker_buffer.popleft()
            if msg.error() is None and (msg.topic(), msg.partition()) in self._paused:
                self._held.append(msg)  # paused after the fetch: delivered after resume()
                continue
            out = self._accept("catchup", msg)
            if out is not None:
                return out

    def _accept(self, source: str, msg: Message) -> Message | None:
        err = msg.error()
        if err is not None:
            if source == "catchup" and err.code() == KafkaError._PARTITION_EOF:
                return None
            return msg
        if source == "catchup":
            if self._from_worker(msg) is None:
                return None
        key = (msg.topic(), msg.partition())
        if source == "primary":
            self._delivered[key] = msg.offset() + 1
        else:
            self._delivered_gap[key] = msg.offset() + 1
        _ts_type, ts = msg.timestamp()
        self.progress.delivered(source, ts)
        self.last_source = source
        return msg

    # -- commits --------------------------------------------------------------------------------------
    def commit(self, message: Message | None = None, offsets: list[TopicPartition] | None = None,
               asynchronous: bool = True) -> list[TopicPartition] | None:
        """Split offsets by range: those inside an open range move the worker's progress, the
        others the primary's offset; one commit record per partition carries both."""
        if message is not None:
            pairs = [((message.topic(), message.partition()), message.offset() + 1)]
        elif offsets is not None:
            pairs = [((tp.topic, tp.partition), tp.offset) for tp in offsets]
        else:
            return self._commit_delivered(asynchronous)
        return self._commit_pairs(pairs, asynchronous)

    def _commit_delivered(self, asynchronous: bool) -> list[TopicPartition] | None:
        pairs = list(self._delivered_gap.items()) + list(self._delivered.items())
        self._delivered_gap.clear()
        return self._commit_pairs(pairs, asynchronous) if pairs else None

    def _commit_pairs(self, pairs: list[tuple[TP, int]], asynchronous: bool):
        touched: list[TP] = []
        for key, offset in pairs:
            if key not in self._owned:
                raise ValueError(f"cannot commit {key[0]}[{key[1]}]: not assigned to this consumer")
            if offset < 0:
                raise ValueError(f"cannot commit a negative offset {offset} for {key[0]}[{key[1]}]")
            state = self._states.setdefault(key, PartitionRanges(offset))
            state.commit(offset)
            self._settle_holes(key)
            if key not in touched:
                touched.append(key)
        if asynchronous and self._in_flight():
            # Coalesce: the state moved; its newest form goes out when the answer comes.
            self._queued.extend(k for k in touched if k not in self._queued)
            self.commits_coalesced += 1
            self._sync_worker()
            return None
        # Whatever waited goes along: each record carries the partition's whole state.
        touched += [k for k in self._queued if k not in touched]
        self._queued.clear()
        records = [self._commit_record(k) for k in touched]
        if asynchronous:
            self._in_flight_since = time.monotonic()
        result = self._primary.commit(offsets=records, asynchronous=asynchronous)
        self._sync_worker()
        return result

    def _in_flight(self) -> bool:
        since = self._in_flight_since
        return since is not None and time.monotonic() - since < COMMIT_STALE_S

    def _on_commit(self, err: KafkaError | None, partitions: list[TopicPartition]) -> None:
        """librdkafka's answer to an asynchronous commit (from poll()): send what waited for it."""
        try:
            if self._user_on_commit is not None:
                self._user_on_commit(err, partitions)
        finally:
            self._in_flight_since = None
            if self._queued:
                keys = [k for k in self._queued if k in self._states]
                self._queued.clear()
                if keys:
                    self._in_flight_since = time.monotonic()
                    self._primary.commit(offsets=[self._commit_record(k) for k in keys], asynchronous=True)

    def _flush_queued(self) -> None:
        """Send the queued state now and wait for it (revocation, close)."""
        keys = [k for k in self._queued if k in self._states]
        self._queued.clear()
        if keys:
            self._primary.commit(offsets=[self._commit_record(k) for k in keys], asynchronous=False)

    def _settle_holes(self, key: TP) -> None:
        state = self._states.get(key)
        if state is None:
            return
        for r in list(state.ranges):
            through = self._read_through.get((key, r.start))
            if through is not None:
                state.finish(r, through)
                if r.done:
                    self._read_through.pop((key, r.start), None)

    def _commit_record(self, key: TP) -> TopicPartition:
        state = self._states[key]
        return TopicPartition(key[0], key[1], state.committed_primary, metadata=state.token())

    def _maybe_auto_commit(self) -> None:
        if self._auto_commit and time.monotonic() >= self._next_auto_commit:
            self._next_auto_commit = time.monotonic() + self._auto_commit_s
            if self._delivered or self._delivered_gap:
                self._commit_delivered(asynchronous=True)

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None):
        """KIP rule: every offset before the answer is checkpointed (gap progress while gaps are open)."""
        stored = self._primary.committed(partitions, **({} if timeout is None else {"timeout": timeout}))
        out = []
        for tp in stored:
            key = (tp.topic, tp.partition)
            if key in self._states:
                offset = self._states[key].committed()
            elif tp.offset >= 0:
                offset = PartitionRanges.from_commit(tp.offset, tp.metadata).committed()
            else:
                offset = OFFSET_INVALID
            out.append(TopicPartition(tp.topic, tp.partition, offset))
        return out

    # -- both workers -------------------------------------------------------------------------------
    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return self._primary.position(partitions)  # the KIP: the worker takes no part

    def pause(self, partitions: list[TopicPartition]) -> None:
        self._primary.pause(partitions)
        self._paused.update((tp.topic, tp.partition) for tp in partitions)
        self._for_worker("pause", partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        self._primary.resume(partitions)
        keys = {(tp.topic, tp.partition) for tp in partitions}
        self._paused.difference_update(keys)
        # Held records first: the worker's librdkafka position is already past them.
        back = [m for m in self._held if (m.topic(), m.partition()) in keys]
        self._held = [m for m in self._held if (m.topic(), m.partition()) not in keys]
        self._worker_buffer.extendleft(reversed(back))
        self._for_worker("resume", partitions)

    def _for_worker(self, op: str, partitions: list[TopicPartition]) -> None:
        mine = [tp for tp in partitions if (tp.topic, tp.partition) in self._reading]
        if mine and self._worker is not None:
            getattr(self._worker, op)([TopicPartition(tp.topic, tp.partition) for tp in mine])

    def child_consumer_is_alive(self) -> bool:
        """Whether the catch-up worker exists (created at the first gap, then kept on standby)."""
        return bool(self._parallel and self._worker is not None and not self._worker_closed)

    def open_ranges(self) -> dict[TP, list[tuple[int, int, int]]]:
        """Open ranges per owned partition as (start, end, next)."""
        if not self._parallel:
            return {}
        return {k: [(r.start, r.end, r.next) for r in s.ranges] for k, s in self._states.items() if s.ranges}

    def metrics(self) -> dict[str, float | int | None]:
        return self.progress.snapshot(self._states.values() if self._parallel else [])

    def progress_line(self) -> str:
        return progress_line(self.metrics())

    def close(self) -> None:
        try:
            if self._parallel and self._auto_commit and (self._delivered or self._delivered_gap):
                self._commit_delivered(asynchronous=False)  # takes the queued state along
            elif self._parallel:
                self._flush_queued()
        finally:
            if self._worker is not None and not self._worker_closed:
                self._worker_closed = True
                self._worker.close()
            self._primary.close()
