"""One adapter per client family, so the interop scenarios are written once.

A `Family` can create topics (where the client has an admin API), list topics, produce keyed
records with a compression codec, acks and idempotence, and open a `Consumer`. A `Consumer` is
driven by `pump()` (give the client a chance to run: poll, read the child process's output), so
a test can run several group members side by side in one thread; the helpers on it
(`wait_ready`, `take`, `wait_for`) are bounded by timeouts.

Families: confluent-kafka (librdkafka), kafka-python, aiokafka, kcat (a child process) and the
Java client in tests/java/client-check (a child process, JSON lines).

Keys and values are text (str) here; every client sends UTF-8 bytes.
"""

from __future__ import annotations

import asyncio
import json
import queue
import re
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

SETUP_HINT = "run `bash scripts/setup.d/10-clients.sh`"
DEFAULT_TIMEOUT = 60.0
CODECS = ("gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True, order=True)
class Rec:
    """A record as a client reported it (partition/offset None if the client cannot tell)."""

    partition: int | None
    offset: int | None
    key: str | None
    value: str | None


def _s(b: bytes | None) -> str | None:
    return None if b is None else b.decode()


def _b(s: str | None) -> bytes | None:
    return None if s is None else s.encode()


def new_group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


class ClientError(AssertionError):
    pass


# ------------------------------------------------------------------------------------------------


class Consumer:
    """Base for a live consumer. Subclasses implement `pump`, `assignment`, `commit`, `close`."""

    def __init__(self) -> None:
        self.records: list[Rec] = []
        self.next_offsets: dict[int, int] = {}

    # subclasses -------------------------------------------------------------------------------
    def pump(self, timeout: float = 0.2) -> None:
        raise NotImplementedError

    def assignment(self) -> set[int]:
        raise NotImplementedError

    def is_ready(self) -> bool:
        """Assigned and positioned (so a record produced from now on will be seen)."""
        raise NotImplementedError

    def commit(self) -> None:
        """Synchronously commit the offsets after the records taken so far."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # shared -----------------------------------------------------------------------------------
    def _got(self, rec: Rec) -> None:
        self.records.append(rec)
        if rec.partition is not None and rec.offset is not None:
            self.next_offsets[rec.partition] = rec.offset + 1

    def wait_for(self, cond: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > deadline:
                raise ClientError(f"{type(self).__name__}: timed out after {timeout:.0f}s waiting for {what}")
            self.pump(0.2)

    def wait_ready(self, timeout: float = DEFAULT_TIMEOUT) -> "Consumer":
        self.wait_for(self.is_ready, timeout, "assignment and position")
        return self

    def take(self, n: int, timeout: float = DEFAULT_TIMEOUT) -> list[Rec]:
        """Wait until at least n records arrived; return all received so far."""
        self.wait_for(lambda: len(self.records) >= n, timeout, f"{n} records (got {len(self.records)})")
        return list(self.records)

    def settle(self, seconds: float) -> None:
        """Keep pumping for a while (to catch records that should NOT arrive)."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.pump(0.2)

    def __enter__(self) -> "Consumer":
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        except Exception:
            pass


class Family:
    name = "?"
    #: the client has an admin API to create topics
    has_admin = True
    #: partitions and offsets of produced records are known to the producer
    reports_offsets = True

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        raise NotImplementedError

    def list_topics(self, bootstrap: str) -> set[str]:
        raise NotImplementedError

    def produce(
        self,
        bootstrap: str,
        topic: str,
        records: Sequence[tuple[str | None, str]],
        *,
        compression: str = "none",
        acks: str = "all",
        idempotent: bool = False,
    ) -> list[Rec]:
        raise NotImplementedError

    def consumer(
        self, bootstrap: str, topic: str, *, group: str | None = None, offset_reset: str = "earliest"
    ) -> Consumer:
        raise NotImplementedError

    # admin beyond CreateTopics (families with an admin API) ----------------------------------------
    def delete_topic(self, bootstrap: str, topic: str) -> None:
        raise NotImplementedError

    def create_partitions(self, bootstrap: str, topic: str, total: int) -> None:
        raise NotImplementedError

    def topic_config(self, bootstrap: str, topic: str) -> dict[str, str | None]:
        raise NotImplementedError

    def list_groups(self, bootstrap: str) -> set[str]:
        raise NotImplementedError

    def group_state(self, bootstrap: str, group: str) -> str:
        """The group's state, lower case ("empty", "stable", ...)."""
        raise NotImplementedError

    def delete_group(self, bootstrap: str, group: str) -> None:
        raise NotImplementedError

    def consume_and_commit(self, bootstrap: str, topic: str, group: str, n: int, timeout: float = DEFAULT_TIMEOUT) -> list[Rec]:
        """Consume exactly n records in `group` from the committed position (else earliest),
        commit the position after them, and leave."""
        with self.consumer(bootstrap, topic, group=group, offset_reset="earliest") as c:
            c.take(n, timeout)
            c.records = c.records[:n]
            c.next_offsets = {}
            for r in c.records:
                assert r.partition is not None and r.offset is not None
                c.next_offsets[r.partition] = max(c.next_offsets.get(r.partition, 0), r.offset + 1)
            c.commit()
            return list(c.records)


# -- confluent-kafka (librdkafka) ----------------------------------------------------------------


class ConfluentConsumer(Consumer):
    def __init__(self, bootstrap: str, topic: str, group: str | None, offset_reset: str):
        super().__init__()
        from confluent_kafka import Consumer as CKConsumer

        self.topic = topic
        self.eof: set[int] = set()
        self._assigned: set[int] = set()
        self.c = CKConsumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group or new_group(),
                "auto.offset.reset": offset_reset,
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "session.timeout.ms": 10000,
                "heartbeat.interval.ms": 1000,
                "socket.timeout.ms": 10000,
                "topic.metadata.refresh.interval.ms": 2000,
            }
        )

        def on_assign(consumer: Any, parts: list[Any]) -> None:
            self._assigned = {p.partition for p in parts}
            self.eof -= self._assigned

        def on_revoke(consumer: Any, parts: list[Any]) -> None:
            self._assigned = set()

        self.c.subscribe([topic], on_assign=on_assign, on_revoke=on_revoke)

    def pump(self, timeout: float = 0.2) -> None:
        from confluent_kafka import KafkaError

        msg = self.c.poll(timeout)
        while msg is not None:
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.eof.add(msg.partition())
                else:
                    raise ClientError(f"confluent consumer error: {err}")
            else:
                self._got(Rec(msg.partition(), msg.offset(), _s(msg.key()), _s(msg.value())))
            msg = self.c.poll(0)

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def is_ready(self) -> bool:
        return bool(self._assigned) and self._assigned <= self.eof

    def commit(self) -> None:
        from confluent_kafka import TopicPartition

        offsets = [TopicPartition(self.topic, p, o) for p, o in sorted(self.next_offsets.items())]
        if offsets:
            result = self.c.commit(offsets=offsets, asynchronous=False)
            bad = [tp for tp in result if tp.error]
            if bad:
                raise ClientError(f"commit failed: {bad}")

    def close(self) -> None:
        self.c.close()


class ConfluentFamily(Family):
    name = "confluent"

    def _admin(self, bootstrap: str) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 10000})

    def create_topic(self, bootstrap: str, topic: str, partitions: int) -> None:
        from confluent_kafka.admin import NewTopic

        admin = self._admin(bootstrap)  # keep the handle alive until the future resolves
        futures = admin.create_topics(
            [NewTopic(topic, num_partitions=partitions, replication_factor=1)], operation_timeout=20, request_timeout=30
        )
        futures[topic].result(timeout=30)

    def list_topics(self, bootstrap: str) -> set[str]:
        md = self._admin(bootstrap).list_topics(timeout=20)
        return {name for name in md.topics}

    def describe_cluster(self, bootstrap: str) -> dict[str, Any]:
        admin = self._admin(bootstrap)
        d = admin.describe_cluster(request_timeout=20).result(timeout=30)
        return {
            "cluster_id": d.cluster_id,
            "controller": d.controller.id if d.controller else -1,
            "nodes": [(n.id, n.host, n.port) for n in d.nodes],
        }

    def delete_topic(self, bootstrap, topic):
        admin = self._admin(bootstrap)
        admin.delete_topics([topic], operation_timeout=20, request_timeout=30)[topic].result(timeout=30)

    def create_partitions(self, bootstrap, topic, total):
        from confluent_kafka.admin import NewPartitions

        admin = self._admin(bootstrap)
        admin.create_partitions([NewPartitions(topic, total)], request_timeout=30)[topic].result(timeout=30)

    def topic_config(self, bootstrap, topic):
        from confluent_kafka.admin import ConfigResource, ResourceType

        admin = self._admin(bootstrap)
        res = ConfigResource(ResourceType.TOPIC, topic)
        entries = admin.describe_configs([res], request_timeout=30)[res].result(timeout=30)
        return {name: e.value for name, e in entries.items()}

    def list_groups(self, bootstrap):
        admin = self._admin(bootstrap)
        result = admin.list_consumer_groups(request_timeout=30).result(timeout=30)
        return {g.group_id for g in result.valid}

    def group_state(self, bootstrap, group):
        admin = self._admin(bootstrap)
        d = admin.describe_consumer_groups([group], request_timeout=30)[group].result(timeout=30)
        state = getattr(d, "state", None) or getattr(d, "group_state", None)
        return str(getattr(state, "name", state)).lower()

    def delete_group(self, bootstrap, group):
        admin = self._admin(bootstrap)
        admin.delete_consumer_groups([group], request_timeout=30)[group].result(timeout=30)

    def produce(self, bootstrap, topic, records, *, compression="none", acks="all", idempotent=False):
        from confluent_kafka import Producer

        p = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": compression,
                "acks": acks,
                "enable.idempotence": idempotent,
                "partitioner": "murmur2_random",
                "linger.ms": 5,
                "message.timeout.ms": 30000,
                # Without idempotence only one request in flight keeps per-key order across retries.
                "max.in.flight.requests.per.connection": 5 if idempotent else 1,
            }
        )
        results: list[Rec | None] = [None] * len(records)
        errors: list[str] = []

        def report(i: int) -> Callable[[Any, Any], None]:
            def cb(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(str(err))
                else:
                    results[i] = Rec(msg.partition(), msg.offset(), _s(msg.key()), _s(msg.value()))

            return cb

        for i, (k, v) in enumerate(records):
            p.produce(topic, key=_b(k), value=_b(v), on_delivery=report(i))
            p.poll(0)
        left = p.flush(45)
        if errors or left:
            raise ClientError(f"confluent produce: {left} undelivered, errors: {errors[:5]}")
        return [r for r in results if r is not None]

    def consumer(self, bootstrap, topic, *, group=None, offset_reset="earliest"):
        return ConfluentConsumer(bootstrap, topic, group, offset_reset)


# -- kafka-python --------------------------------------------------------------------------------


class KafkaPythonConsumer(Consumer):
    """kafka-python's consumer is not thread-safe and blocks inside poll() while it (re)joins a
    group, so each one runs in its own thread that polls continuously; other calls are handed to
    that thread. This lets several members of one group rebalance side by side."""

    def __init__(self, bootstrap: str, topic: str, group: str | None, offset_reset: str):
        super().__init__()
        import concurrent.futures

        self.topic = topic
        self._futures = concurrent.futures
        self._calls: "queue.Queue[tuple[Callable[[], Any], Any]]" = queue.Queue()
        self._incoming: "queue.Queue[Rec]" = queue.Queue()
        self._assigned: set[int] = set()
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._config = dict(
            bootstrap_servers=bootstrap,
            group_id=group or new_group(),
            auto_offset_reset=offset_reset,
            enable_auto_commit=False,
            session_timeout_ms=10000,
            heartbeat_interval_ms=1000,
            request_timeout_ms=30000,
            metadata_max_age_ms=2000,
        )
        self._thread = threading.Thread(target=self._run, name="kafka-python-consumer", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from kafka import KafkaConsumer

        try:
            self.c = KafkaConsumer(**self._config)
            self.c.subscribe([self.topic])
            # Have the topic's partitions before the first join. Otherwise kafka-python 3.0 joins
            # before its first metadata answer, assigns nothing and rebalances again at once;
            # under CPU load that back-to-back rebalance sometimes leaves it silent (no heartbeats,
            # no fetches: the coordinator drops it after session.timeout.ms), a client-side hang
            # seen in CI (the broker logs show the second generation stable, then nothing).
            self.c.partitions_for_topic(self.topic)
            while not self._stop.is_set():
                while True:
                    try:
                        fn, fut = self._calls.get_nowait()
                    except queue.Empty:
                        break
                    try:
                        fut.set_result(fn())
                    except BaseException as e:  # handed back to the caller
                        fut.set_exception(e)
                if self._stop.is_set():
                    break
                batches = self.c.poll(timeout_ms=100)
                for tp, msgs in sorted(batches.items()):
                    for m in msgs:
                        self._incoming.put(Rec(m.partition, m.offset, _s(m.key), _s(m.value)))
                self._assigned = {tp.partition for tp in self.c.assignment()}
        except BaseException as e:
            self._error = e
        finally:
            while True:  # nobody will run what is still queued
                try:
                    _, fut = self._calls.get_nowait()
                except queue.Empty:
                    break
                fut.set_exception(ClientError("kafka-python consumer thread ended"))

    def _call(self, fn: Callable[[], Any], timeout: float = 45) -> Any:
        if self._error is not None:
            raise ClientError(f"kafka-python consumer failed: {self._error!r}")
        if not self._thread.is_alive():
            raise ClientError("kafka-python consumer thread is not running")
        fut = self._futures.Future()
        self._calls.put((fn, fut))
        try:
            return fut.result(timeout)
        except self._futures.TimeoutError:
            raise ClientError(f"kafka-python consumer call timed out after {timeout}s") from None

    def pump(self, timeout: float = 0.2) -> None:
        if self._error is not None:
            raise ClientError(f"kafka-python consumer failed: {self._error!r}")
        try:
            self._got(self._incoming.get(timeout=timeout))
            while True:
                self._got(self._incoming.get_nowait())
        except queue.Empty:
            pass

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def is_ready(self) -> bool:
        def ready() -> bool:
            parts = self.c.assignment()
            return bool(parts) and all(self.c.position(tp, timeout_ms=10000) is not None for tp in parts)

        return self._call(ready)

    def commit(self) -> None:
        from kafka import TopicPartition
        from kafka.structs import OffsetAndMetadata

        offsets = {
            TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in self.next_offsets.items()
        }
        if offsets:
            self._call(lambda: self.c.commit(offsets))

    def close(self) -> None:
        if self._thread.is_alive():
            def close() -> None:
                self._stop.set()
                self.c.close()

            self._call(close)
            self._thread.join(15)


class KafkaPythonFamily(Family):
    name = "kafka-python"

    def _admin(self, bootstrap: str) -> Any:
        from kafka.admin import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)

    def create_topic(self, bootstrap, topic, partitions):
        from kafka.admin import NewTopic

        admin = self._admin(bootstrap)
        try:
            admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
        finally:
            admin.close()

    def list_topics(self, bootstrap):
        return self._with_admin(bootstrap, lambda a: set(a.list_topics()))

    def _with_admin(self, bootstrap: str, fn: Callable[[Any], Any]) -> Any:
        admin = self._admin(bootstrap)
        try:
            return fn(admin)
        finally:
            admin.close()

    def delete_topic(self, bootstrap, topic):
        self._with_admin(bootstrap, lambda a: a.delete_topics([topic]))

    def create_partitions(self, bootstrap, topic, total):
        from kafka.admin import NewPartitions

        self._with_admin(bootstrap, lambda a: a.create_partitions({topic: NewPartitions(total_count=total)}))

    def topic_config(self, bootstrap, topic):
        from kafka.admin import ConfigResource, ConfigResourceType

        r = self._with_admin(
            bootstrap, lambda a: a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter="all")
        )
        return {name: c["value"] for name, c in r["topic"][topic].items()}

    def list_groups(self, bootstrap):
        return {g["group_id"] for g in self._with_admin(bootstrap, lambda a: a.list_groups())}

    def group_state(self, bootstrap, group):
        d = self._with_admin(bootstrap, lambda a: a.describe_groups([group]))[group]
        if d.get("error"):
            raise ClientError(f"kafka-python describe_groups {group}: {d['error']}")
        return str(d["group_state"]).lower()

    def delete_group(self, bootstrap, group):
        r = self._with_admin(bootstrap, lambda a: a.delete_groups([group]))
        if r.get(group) != "OK":
            raise ClientError(f"kafka-python delete_groups {group}: {r}")

    def produce(self, bootstrap, topic, records, *, compression="none", acks="all", idempotent=False):
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=bootstrap,
            compression_type=None if compression == "none" else compression,
            acks=-1 if acks == "all" else int(acks),
            enable_idempotence=idempotent,
            linger_ms=5,
            request_timeout_ms=20000,
            max_in_flight_requests_per_connection=5 if idempotent else 1,
        )
        try:
            futures = [p.send(topic, key=_b(k), value=_b(v)) for k, v in records]
            p.flush(timeout=45)
            out = []
            for (k, v), f in zip(records, futures):
                md = f.get(timeout=30)
                out.append(Rec(md.partition, md.offset, k, v))
            return out
        finally:
            p.close(timeout=10)

    def consumer(self, bootstrap, topic, *, group=None, offset_reset="earliest"):
        return KafkaPythonConsumer(bootstrap, topic, group, offset_reset)


# -- aiokafka (runs on its own event loop thread) --------------------------------------------------


class _LoopThread:
    """A private asyncio loop in a daemon thread; `run(coro)` waits (bounded) for the result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="aiokafka-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = DEFAULT_TIMEOUT) -> Any:
        fut = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise ClientError(f"aiokafka call timed out after {timeout}s") from None

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


_AIO_LOOP: _LoopThread | None = None


def _aio() -> _LoopThread:
    global _AIO_LOOP
    if _AIO_LOOP is None or not _AIO_LOOP.thread.is_alive():
        _AIO_LOOP = _LoopThread()
    return _AIO_LOOP


class AIOKafkaConsumerAdapter(Consumer):
    def __init__(self, bootstrap: str, topic: str, group: str | None, offset_reset: str):
        super().__init__()
        self.topic = topic
        self.loop = _aio()

        async def make() -> Any:
            from aiokafka import AIOKafkaConsumer

            c = AIOKafkaConsumer(
                topic,
                bootstrap_servers=bootstrap,
                group_id=group or new_group(),
                auto_offset_reset=offset_reset,
                enable_auto_commit=False,
                session_timeout_ms=10000,
                heartbeat_interval_ms=1000,
                metadata_max_age_ms=2000,
            )
            await c.start()
            return c

        self.c = self.loop.run(make())

    def pump(self, timeout: float = 0.2) -> None:
        batches = self.loop.run(self.c.getmany(timeout_ms=int(timeout * 1000)), timeout + 30)
        for tp, msgs in sorted(batches.items()):
            for m in msgs:
                self._got(Rec(m.partition, m.offset, _s(m.key), _s(m.value)))

    def assignment(self) -> set[int]:
        async def get() -> set[int]:
            return {tp.partition for tp in self.c.assignment()}

        return self.loop.run(get())

    def is_ready(self) -> bool:
        async def ready() -> bool:
            parts = self.c.assignment()
            if not parts:
                return False
            for tp in parts:
                await asyncio.wait_for(self.c.position(tp), 15)
            return True

        return self.loop.run(ready())

    def commit(self) -> None:
        from aiokafka import TopicPartition

        offsets = {TopicPartition(self.topic, p): o for p, o in self.next_offsets.items()}
        if offsets:
            self.loop.run(self.c.commit(offsets))

    def close(self) -> None:
        self.loop.run(self.c.stop())


class AIOKafkaFamily(Family):
    name = "aiokafka"

    def _with_admin(self, bootstrap: str, fn: Callable[[Any], Any]) -> Any:
        async def go() -> Any:
            from aiokafka.admin import AIOKafkaAdminClient

            admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
            await admin.start()
            try:
                return await fn(admin)
            finally:
                await admin.close()

        return _aio().run(go())

    def create_topic(self, bootstrap, topic, partitions):
        from aiokafka.admin import NewTopic

        async def create(admin: Any) -> None:
            resp = await admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])
            errors = [e for t in resp.topic_errors for e in [t[1]] if e != 0]
            if errors:
                raise ClientError(f"aiokafka create_topics error codes {errors}: {resp}")

        self._with_admin(bootstrap, create)

    def list_topics(self, bootstrap):
        async def lt(admin: Any) -> set[str]:
            return set(await admin.list_topics())

        return self._with_admin(bootstrap, lt)

    def delete_topic(self, bootstrap, topic):
        async def dt(admin: Any) -> None:
            resp = await admin.delete_topics([topic])
            codes = [t[1] for t in resp.topic_error_codes]
            if any(codes):
                raise ClientError(f"aiokafka delete_topics {topic}: {resp}")

        self._with_admin(bootstrap, dt)

    def create_partitions(self, bootstrap, topic, total):
        from aiokafka.admin import NewPartitions

        async def cp(admin: Any) -> None:
            await admin.create_partitions({topic: NewPartitions(total_count=total)})

        self._with_admin(bootstrap, cp)

    def topic_config(self, bootstrap, topic):
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        async def dc(admin: Any) -> dict[str, str | None]:
            out: dict[str, str | None] = {}
            for resp in await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)]):
                for error_code, _msg, _type, name, entries, *_ in resp.resources:
                    if error_code or name != topic:
                        raise ClientError(f"aiokafka describe_configs {topic}: error {error_code}")
                    out.update({e[0]: e[1] for e in entries})
            return out

        return self._with_admin(bootstrap, dc)

    def list_groups(self, bootstrap):
        async def lg(admin: Any) -> set[str]:
            return {g[0] for g in await admin.list_consumer_groups()}

        return self._with_admin(bootstrap, lg)

    def group_state(self, bootstrap, group):
        async def dg(admin: Any) -> str:
            for resp in await admin.describe_consumer_groups([group]):
                for error_code, gid, state, *_ in resp.groups:
                    if gid == group:
                        if error_code:
                            raise ClientError(f"aiokafka describe_consumer_groups {group}: error {error_code}")
                        return str(state).lower()
            raise ClientError(f"aiokafka describe_consumer_groups: {group} not in the answer")

        return self._with_admin(bootstrap, dg)

    # aiokafka has no DeleteGroups call: delete_group stays NotImplementedError.

    def produce(self, bootstrap, topic, records, *, compression="none", acks="all", idempotent=False):
        async def go() -> list[Rec]:
            from aiokafka import AIOKafkaProducer

            p = AIOKafkaProducer(
                bootstrap_servers=bootstrap,
                compression_type=None if compression == "none" else compression,
                acks=-1 if acks == "all" else int(acks),
                enable_idempotence=idempotent,
                linger_ms=5,
                request_timeout_ms=20000,
            )
            await p.start()
            try:
                futs = [await p.send(topic, key=_b(k), value=_b(v)) for k, v in records]
                mds = await asyncio.wait_for(asyncio.gather(*futs), 45)
                return [Rec(md.partition, md.offset, k, v) for (k, v), md in zip(records, mds)]
            finally:
                await p.stop()

        return _aio().run(go(), 90)

    def consumer(self, bootstrap, topic, *, group=None, offset_reset="earliest"):
        return AIOKafkaConsumerAdapter(bootstrap, topic, group, offset_reset)


# -- child-process clients ---------------------------------------------------------------------------


class ChildProcess:
    """A child process whose stdout and stderr lines are collected by reader threads."""

    def __init__(self, cmd: list[str], stdin: bool = True):
        self.cmd = cmd
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.out: "queue.Queue[str]" = queue.Queue()
        self.err_lines: list[str] = []
        self.err: "queue.Queue[str]" = queue.Queue()
        threading.Thread(target=self._read, args=(self.proc.stdout, self.out), daemon=True).start()
        threading.Thread(target=self._read, args=(self.proc.stderr, self.err), daemon=True).start()

    @staticmethod
    def _read(stream: Any, q: "queue.Queue[str]") -> None:
        for line in stream:
            q.put(line.rstrip("\n"))

    def lines(self, timeout: float) -> tuple[list[str], list[str]]:
        """Whatever stdout/stderr lines arrived within `timeout` (waits for the first stdout line)."""
        out: list[str] = []
        err: list[str] = []
        try:
            out.append(self.out.get(timeout=timeout))
        except queue.Empty:
            pass
        for q, dest in ((self.out, out), (self.err, err)):
            while True:
                try:
                    dest.append(q.get_nowait())
                except queue.Empty:
                    break
        self.err_lines.extend(err)
        return out, err

    def stderr_tail(self) -> str:
        return "\n".join(self.err_lines[-30:])

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close_stdin(self) -> None:
        if self.proc.stdin and not self.proc.stdin.closed:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
            raise ClientError(f"{self.cmd[0]} did not exit within {timeout}s; stderr:\n{self.stderr_tail()}")


# -- Java (tests/java/client-check) ------------------------------------------------------------------


class JavaConsumer(Consumer):
    def __init__(self, bootstrap: str, topic: str, group: str | None, offset_reset: str):
        super().__init__()
        from tests.support import java_client

        args = ["--bootstrap", bootstrap, "--topic", topic, "--offset-reset", offset_reset, "--timeout-ms", "600000"]
        args += ["--group", group or new_group()]
        self.child = ChildProcess(java_client.command("consume", *args))
        self._assigned: set[int] = set()
        self._ready = False
        self.committed: list[dict[str, int]] = []

    def pump(self, timeout: float = 0.2) -> None:
        out, _ = self.child.lines(timeout)
        for line in out:
            try:
                ev = json.loads(line)
            except ValueError:
                raise ClientError(f"java client printed a non-JSON line: {line!r}") from None
            kind = ev.get("event")
            if kind == "record":
                self._got(Rec(ev["partition"], ev["offset"], ev["key"], ev["value"]))
            elif kind == "assigned":
                self._assigned = set(ev["partitions"])  # eager protocol: the full new assignment
                self._ready = bool(self._assigned)
            elif kind == "assignment":
                self._assigned = set(ev["partitions"])
            elif kind in ("revoked", "lost"):
                self._assigned -= set(ev["partitions"])
                self._ready = False
            elif kind == "committed":
                self.committed.append({int(k): v for k, v in ev["offsets"].items()})
        if self.child.proc.poll() is not None and not out:
            raise ClientError(
                f"java consumer exited with {self.child.proc.returncode}; stderr:\n{self.child.stderr_tail()}"
            )

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def is_ready(self) -> bool:
        return self._ready

    def commit(self) -> None:
        before = len(self.committed)
        # The tool commits what it printed; trim to what we took is handled by consume_and_commit.
        self.child.send("commit")
        self.wait_for(lambda: len(self.committed) > before, 30, "commit acknowledgement")

    def close(self) -> None:
        if self.child.proc.poll() is None:
            self.child.close_stdin()
            self.child.wait(30)


class JavaFamily(Family):
    name = "java"

    def _run(self, sub: str, *args: str, input: str | None = None) -> list[dict[str, Any]]:
        from tests.support import java_client

        proc = java_client.run(sub, *args, input=input, timeout=120)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]

    def create_topic(self, bootstrap, topic, partitions):
        out = self._run("create-topic", "--bootstrap", bootstrap, "--topic", topic, "--partitions", str(partitions))
        assert out and out[-1]["created"] == topic

    def list_topics(self, bootstrap):
        return set(self._run("list-topics", "--bootstrap", bootstrap)[-1]["topics"])

    def delete_topic(self, bootstrap, topic):
        assert self._run("delete-topic", "--bootstrap", bootstrap, "--topic", topic)[-1]["deleted"] == topic

    def create_partitions(self, bootstrap, topic, total):
        self._run("create-partitions", "--bootstrap", bootstrap, "--topic", topic, "--partitions", str(total))

    def topic_config(self, bootstrap, topic):
        return dict(self._run("describe-configs", "--bootstrap", bootstrap, "--topic", topic)[-1]["configs"])

    def list_groups(self, bootstrap):
        return set(self._run("list-groups", "--bootstrap", bootstrap)[-1]["groups"])

    def group_state(self, bootstrap, group):
        return str(self._run("describe-group", "--bootstrap", bootstrap, "--group", group)[-1]["state"]).lower()

    def delete_group(self, bootstrap, group):
        assert self._run("delete-group", "--bootstrap", bootstrap, "--group", group)[-1]["deleted"] == group

    def describe_cluster(self, bootstrap: str) -> dict[str, Any]:
        d = self._run("describe-cluster", "--bootstrap", bootstrap)[-1]
        return {
            "cluster_id": d["clusterId"],
            "controller": d["controller"],
            "nodes": [(n["id"], n["host"], n["port"]) for n in d["nodes"]],
        }

    def produce(self, bootstrap, topic, records, *, compression="none", acks="all", idempotent=False):
        for k, v in records:
            assert k is not None and "\t" not in k and "\n" not in (k + v), "java tool input is key<TAB>value lines"
        out = self._run(
            "produce", "--bootstrap", bootstrap, "--topic", topic, "--compression", compression,
            "--acks", acks, "--idempotent", str(idempotent).lower(),
            input="".join(f"{k}\t{v}\n" for k, v in records),
        )
        return [Rec(o["partition"], o["offset"], o["key"], o["value"]) for o in out]

    def consumer(self, bootstrap, topic, *, group=None, offset_reset="earliest"):
        return JavaConsumer(bootstrap, topic, group, offset_reset)

    def consume_and_commit(self, bootstrap, topic, group, n, timeout=DEFAULT_TIMEOUT):
        out = self._run(
            "consume", "--bootstrap", bootstrap, "--topic", topic, "--group", group,
            "--offset-reset", "earliest", "--max", str(n), "--commit", "--timeout-ms", str(int(timeout * 1000)),
            input="",
        )
        # stdin is empty, so the tool may see EOF ("exit") before n records: it then exits 3.
        recs = [Rec(e["partition"], e["offset"], e["key"], e["value"]) for e in out if e.get("event") == "record"]
        if len(recs) != n or not any(e.get("event") == "committed" for e in out):
            raise ClientError(f"java consume --max {n} --commit printed {out}")
        return recs


# -- kcat (librdkafka CLI) ---------------------------------------------------------------------------


def kcat_path() -> str:
    path = shutil.which("kcat") or shutil.which("kafkacat")
    if not path:
        raise ClientError(f"kcat not found; {SETUP_HINT}")
    return path


_KCAT_ASSIGNED = re.compile(r"rebalanced \(.*\): assigned: (.*)$")
_KCAT_REVOKED = re.compile(r"rebalanced \(.*\): revoked: (.*)$")
_KCAT_EOF = re.compile(r"Reached end of topic (\S+) \[(\d+)\] at offset (\d+)")
_KCAT_PART = re.compile(r"\[(\d+)\]")


class KcatConsumer(Consumer):
    """`kcat -G group topic` (balanced consumer, auto commit on close), JSON envelope per record."""

    def __init__(self, bootstrap: str, topic: str, group: str | None, offset_reset: str, count: int | None = None):
        super().__init__()
        cmd = [
            kcat_path(), "-b", bootstrap, "-J", "-u", "-X", f"auto.offset.reset={offset_reset}",
            "-X", "session.timeout.ms=10000", "-X", "heartbeat.interval.ms=1000",
            "-X", "enable.partition.eof=true", "-X", "topic.metadata.refresh.interval.ms=2000",
        ]
        if count is not None:
            cmd += ["-c", str(count)]
        cmd += ["-G", group or new_group(), topic]
        self.child = ChildProcess(cmd, stdin=False)
        self._assigned: set[int] = set()
        self.eof: set[int] = set()

    def pump(self, timeout: float = 0.2) -> None:
        out, err = self.child.lines(timeout)
        for line in err:
            m = _KCAT_ASSIGNED.search(line)
            if m:
                self._assigned = {int(p) for p in _KCAT_PART.findall(m.group(1))}
                self.eof -= self._assigned
                continue
            if _KCAT_REVOKED.search(line):
                self._assigned = set()
                continue
            m = _KCAT_EOF.search(line)
            if m:
                self.eof.add(int(m.group(2)))
            elif line.startswith("%") and ("ERROR" in line or "FATAL" in line):
                raise ClientError(f"kcat: {line}")
        for line in out:
            try:
                ev = json.loads(line)
            except ValueError:
                raise ClientError(f"kcat printed a non-JSON line: {line!r}") from None
            self._got(Rec(ev["partition"], ev["offset"], ev.get("key"), ev.get("payload")))

    def assignment(self) -> set[int]:
        return set(self._assigned)

    def is_ready(self) -> bool:
        return bool(self._assigned) and self._assigned <= self.eof

    def commit(self) -> None:
        raise NotImplementedError("kcat commits on close; use consume_and_commit")

    def close(self) -> None:
        if self.child.proc.poll() is None:
            self.child.proc.terminate()  # kcat closes the consumer (LeaveGroup, commit) on SIGTERM
            self.child.wait(30)


class KcatFamily(Family):
    name = "kcat"
    has_admin = False
    reports_offsets = False

    def run(self, *args: str, input: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([kcat_path(), *args], input=input, capture_output=True, text=True, timeout=timeout)
        if proc.returncode != 0:
            raise ClientError(f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return proc

    def metadata(self, bootstrap: str, topic: str | None = None) -> dict[str, Any]:
        args = ["-b", bootstrap, "-L", "-J", "-m", "20"]
        if topic:
            args += ["-t", topic]
        return json.loads(self.run(*args).stdout)

    def list_topics(self, bootstrap):
        return {t["topic"] for t in self.metadata(bootstrap)["topics"]}

    def create_topic(self, bootstrap, topic, partitions):
        raise NotImplementedError("kcat has no admin API")

    def produce(self, bootstrap, topic, records, *, compression="none", acks="all", idempotent=False):
        for k, v in records:
            assert k is not None and "\t" not in k and "\n" not in (k + v)
        self.run(
            # -E: a dropped connection is not fatal; librdkafka reconnects and retries.
            "-P", "-E", "-b", bootstrap, "-t", topic, "-K", "\t", "-z", compression,
            "-X", f"acks={'-1' if acks == 'all' else acks}", "-X", f"enable.idempotence={str(idempotent).lower()}",
            "-X", "partitioner=murmur2_random", "-X", "linger.ms=5", "-X", "message.timeout.ms=30000",
            "-X", f"max.in.flight={5 if idempotent else 1}",
            input="".join(f"{k}\t{v}\n" for k, v in records),
            timeout=90,
        )
        return [Rec(None, None, k, v) for k, v in records]

    def consumer(self, bootstrap, topic, *, group=None, offset_reset="earliest"):
        return KcatConsumer(bootstrap, topic, group, offset_reset)

    def consume_and_commit(self, bootstrap, topic, group, n, timeout=DEFAULT_TIMEOUT):
        c = KcatConsumer(bootstrap, topic, group, "earliest", count=n)
        try:
            c.take(n, timeout)
            code = c.child.wait(30)  # kcat -c N exits by itself, committing on the way out
            if code != 0:
                raise ClientError(f"kcat -c {n} exited {code}:\n{c.child.stderr_tail()}")
            c.pump(0.1)
            return list(c.records)
        finally:
            if c.child.proc.poll() is None:
                c.child.proc.kill()
                c.child.proc.wait(5)


FAMILIES: dict[str, type[Family]] = {
    "confluent": ConfluentFamily,
    "kafka-python": KafkaPythonFamily,
    "aiokafka": AIOKafkaFamily,
    "kcat": KcatFamily,
    "java": JavaFamily,
}


def family(name: str) -> Family:
    return FAMILIES[name]()


def keyed_records(n: int, keys: int = 7, prefix: str = "v", size: int = 40) -> list[tuple[str, str]]:
    """n records over `keys` distinct keys; compressible values that say where they came from."""
    pad = "abcdefghij" * (size // 10 + 1)
    return [(f"key-{i % keys}", f"{prefix}-{i:06d}-{pad[: max(0, size - 10)]}") for i in range(n)]


def murmur2_partition(key: str, partitions: int) -> int:
    """The Java client's default partition for a non-null key (murmur2, positive, modulo)."""
    from kafka.partitioner.default import murmur2

    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions


def pump_all(consumers: Iterable[Consumer], cond: Callable[[], bool], timeout: float, what: str) -> None:
    """Pump several consumers round-robin until cond() holds (bounded)."""
    consumers = list(consumers)
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise ClientError(f"timed out after {timeout:.0f}s waiting for {what}")
        for c in consumers:
            c.pump(0.1)
