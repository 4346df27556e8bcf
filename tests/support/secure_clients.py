"""Produce and read back over a secured listener with each client family, and collect the error a
family reports when it cannot connect: shared by tests/e2e/test_security.py and
tests/e2e/test_security_clients.py. Client settings come from tests/support/secure_broker.py.

Every round trip writes to and reads from partition 0 only, from its start, so the values a
test put there in order are what comes back.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support import java_client
from tests.support.clients import kcat_path
from tests.support.secure_broker import SecureBroker

READ_TIMEOUT = 30.0


def confluent_produce(conf: dict, topic: str, values: list[bytes]) -> None:
    from confluent_kafka import Producer

    errors = []
    p = Producer({**conf, "acks": "all", "error_cb": errors.append})
    for v in values:
        p.produce(topic, v, partition=0, on_delivery=lambda err, _m: err and errors.append(err))
    left = p.flush(30)
    assert left == 0 and not errors, f"confluent producer: {left} undelivered, errors {errors}"


def confluent_read(conf: dict, topic: str, count: int) -> list[bytes]:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({**conf, "group.id": "sec-readers", "enable.auto.commit": False})
    got: list[bytes] = []
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + READ_TIMEOUT
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
    finally:
        c.close()
    return got


def aiokafka_round_trip(kw: dict, topic: str, values: list[bytes], expect: int) -> list[bytes]:
    """aiokafka writes `values`, then reads partition 0 from the start until `expect` records."""
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(acks="all", request_timeout_ms=15000, **kw)
        await producer.start()
        try:
            for v in values:
                await producer.send_and_wait(topic, v, partition=0)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(group_id=None, enable_auto_commit=False, auto_offset_reset="earliest", **kw)
        await consumer.start()
        got: list[bytes] = []
        try:
            tp = TopicPartition(topic, 0)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            deadline = time.monotonic() + READ_TIMEOUT
            while len(got) < expect and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return got

    return asyncio.run(run())


def java_round_trip(secure: SecureBroker, listener: str, topic: str, values: list[bytes], expect: int,
                    **settings) -> list[bytes]:
    """The Java client (kafka-clients) writes `values` and reads partition 0 back, in one JVM."""
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as config:
        config.write(secure.java(listener, **settings))
        config.flush()
        proc = java_client.run("round-trip", "--bootstrap", secure.address(listener), "--topic", topic,
                               "--expect", str(expect), "--config", config.name,
                               input="".join(v.decode() + "\n" for v in values), timeout=90)
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    produced = [e for e in events if e["event"] == "produced"]
    assert len(produced) == len(values), f"java produced {len(produced)} of {len(values)}:\n{proc.stderr[-2000:]}"
    return [e["value"].encode() for e in events if e["event"] == "record"]


def kcat_librdkafka_version() -> tuple[int, ...]:
    """The librdkafka version kcat runs with (`kcat -V`)."""
    out = subprocess.run([kcat_path(), "-V"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", out)
    assert found, f"no librdkafka version in `kcat -V`: {out}"
    return tuple(int(x) for x in found.groups())


def wheel_librdkafka() -> str:
    """The librdkafka confluent-kafka's wheel bundles (a current release)."""
    import confluent_kafka

    libs = sorted((Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs").glob("librdkafka*.so*"))
    assert libs, "confluent-kafka's wheel bundles no librdkafka"
    return str(libs[0])


def _kcat(conf: dict, *args: str, input: str | None = None, preload: str | None = None) -> subprocess.CompletedProcess[str]:
    settings = [a for k, v in conf.items() if k != "bootstrap.servers" for a in ("-X", f"{k}={v}")]
    env = {**os.environ, "LD_PRELOAD": preload} if preload else None
    return subprocess.run([kcat_path(), "-b", conf["bootstrap.servers"], *settings, *args], input=input,
                          capture_output=True, text=True, timeout=60, env=env)


def kcat_failure(conf: dict, preload: str | None = None) -> str:
    """stderr of a kcat -L that must fail to reach the broker."""
    proc = _kcat(conf, "-L", "-m", "5", preload=preload)
    assert proc.returncode != 0, f"kcat -L succeeded: {proc.stdout[-500:]}"
    return proc.stderr


def kcat_round_trip(conf: dict, topic: str, values: list[bytes], expect: int,
                    preload: str | None = None) -> list[bytes]:
    """kcat -P writes `values` (one a line), kcat -C reads `expect` records from the start
    (`preload`: another librdkafka to run kcat with)."""
    proc = _kcat(conf, "-P", "-t", topic, "-p", "0", "-X", "acks=all",
                 input="".join(v.decode() + "\n" for v in values), preload=preload)
    assert proc.returncode == 0, f"kcat -P exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    proc = _kcat(conf, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-c", str(expect), "-e", "-f", "%s\\n",
                 preload=preload)
    assert proc.returncode == 0, f"kcat -C exited {proc.returncode}:\n{proc.stderr[-2000:]}"
    return [line.encode() for line in proc.stdout.splitlines()]


def java_failure(secure: SecureBroker, listener: str, **settings) -> str:
    """stderr of the Java admin client (list-topics) that must fail to reach `listener`."""
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as config:
        config.write(secure.java(listener, **settings))
        config.flush()
        proc = subprocess.run(java_client.command("list-topics", "--bootstrap", secure.address(listener),
                                                  "--config", config.name),
                              capture_output=True, text=True, timeout=90)
    assert proc.returncode != 0, f"the Java client reached {listener}: {proc.stdout[-500:]}"
    return proc.stderr


def aiokafka_failure(kw: dict, caplog) -> str:
    """What aiokafka logs when a producer cannot bootstrap (it then raises KafkaConnectionError)."""
    import pytest
    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    async def start() -> None:
        producer = AIOKafkaProducer(request_timeout_ms=10000, **kw)
        try:
            await producer.start()
        finally:
            await producer.stop()

    caplog.clear()
    with caplog.at_level("ERROR", logger="aiokafka"):
        with pytest.raises(KafkaConnectionError):
            asyncio.run(start())
    return "\n".join(r.getMessage() for r in caplog.records)
