"""Bad input on the secure listeners (issue 23): seeded, damaged SASL exchanges (SaslHandshake and
SaslAuthenticate frames truncated, with wrong lengths, random SCRAM messages, PLAIN tokens without
NULs, over-long tokens, bytes after a finished exchange) and TLS garbage (random bytes, a truncated
ClientHello, an HTTP request) close only that connection: each one is closed by the broker, any
answer it got carries an error, the broker logs no traceback and counts the failures, and a
well-behaved SASL_SSL producer and consumer on their own connections go on throughout.

Same tests against Apache Kafka 4.1 (`--kafka-target=apache`), except the broker-log and metric
checks. FLOTILLA_SECURITY_FUZZ_SEED reproduces a run; the seed is printed.
"""

from __future__ import annotations

import collections
import os
import random
import re
import socket
import ssl
import struct
import threading
import time
import uuid

import pytest
import scramp
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

from flotilla.testenv import kafka_wire
from tests.support.interop_suite import make_topic
from tests.support.prometheus import metric
from tests.support.secure_broker import USERS, SecureBroker, running_secure_broker
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(300)

SEED = int(os.environ.get("FLOTILLA_SECURITY_FUZZ_SEED", "20261126"))
SASL_CASES = 120  # per SASL listener
TLS_CASES = 30  # per TLS listener
FAILURE = re.compile(r"Traceback|failed; answering|unexpected error|exception (was never retrieved|in callback)",
                     re.IGNORECASE)
SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE = 58, 33, 34


@pytest.fixture(scope="module")
def secure(kafka_target, tmp_path_factory) -> SecureBroker:
    with running_secure_broker(kafka_target, tmp_path_factory.mktemp("secfuzz")) as sb:
        yield sb


class Bystander:
    """A SASL_SSL/SCRAM producer and consumer on connections of their own, running in a thread
    while the fuzz goes on: one record every 20 ms, read back as it comes."""

    def __init__(self, secure: SecureBroker, topic: str):
        from confluent_kafka import Consumer, Producer, TopicPartition

        conf = secure.confluent("SASL_SSL")
        self.errors: list[str] = []
        self.producer = Producer({**conf, "acks": "all", "linger.ms": 0,
                                  "error_cb": lambda e: self.errors.append(f"producer: {e}")})
        self.consumer = Consumer({**conf, "group.id": f"bystander-{uuid.uuid4().hex[:6]}",
                                  "error_cb": lambda e: self.errors.append(f"consumer: {e}")})
        self.consumer.assign([TopicPartition(topic, 0, 0)])
        self.topic, self.sent, self.delivered, self.read = topic, 0, 0, set()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, _msg) -> None:
        if err:
            self.errors.append(f"delivery: {err}")
        else:
            self.delivered += 1

    def _run(self) -> None:
        while not self.stopping.is_set():
            self.producer.produce(self.topic, str(self.sent).encode(), partition=0, on_delivery=self._delivered)
            self.sent += 1
            self.producer.poll(0)
            m = self.consumer.poll(0.02)
            if m is not None and not m.error():
                self.read.add(int(m.value()))

    def __enter__(self) -> "Bystander":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stopping.set()
        self.thread.join(30)
        left = self.producer.flush(30)
        try:
            wait_for(f"the bystander reading back its {self.sent} records", self._drain, timeout=30,
                     interval=0.1, until=lambda n: n >= self.sent)
        finally:
            self.consumer.close()
        assert left == 0 and self.delivered == self.sent, (left, self.delivered, self.sent)

    def _drain(self) -> int:
        for m in self.consumer.consume(500, 0.2):
            if not m.error():
                self.read.add(int(m.value()))
        return len(self.read)


def _connect(secure: SecureBroker, listener: str) -> kafka_wire.KafkaConnection:
    conn = kafka_wire.KafkaConnection(secure.address(listener), timeout=10)
    if listener == "SASL_SSL":
        ctx = ssl.create_default_context(cafile=str(secure.pki.ca_file))
        conn.sock = ctx.wrap_socket(conn.sock, server_hostname="localhost")
    return conn


def _frame(conn: kafka_wire.KafkaConnection, request, correlation_id: int = 100) -> bytes:
    """A request frame's payload (without its length prefix)."""
    t = type(request)
    return conn.header_bytes(t.__api_key__, t.__version__, t.__flexible__, correlation_id) + kafka_wire.encode(request)


def _sized(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _random_bytes(rng: random.Random, lo: int, hi: int) -> bytes:
    return rng.randbytes(rng.randint(lo, hi))


def _mutate(rng: random.Random, data: bytes) -> bytes:
    """A few bytes changed, dropped or duplicated: never the same bytes."""
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(b))
        op = rng.random()
        if op < 0.6:
            b[i] ^= rng.randint(1, 255)
        elif op < 0.8 and len(b) > 1:
            del b[i]
        else:
            b.insert(i, b[i])
    return bytes(b) if bytes(b) != data else data + b"\x00"


# --- SASL cases: (kind, steps) where a step is ("ok", request) - a request Kafka accepts, answered with
# error 0 - or ("raw", bytes) - bytes sent as they are - or ("shut", None) - the client's half-close,
# for a frame whose length promises more than is sent (the broker rightly waits for the rest).

def _scram_final(rng: random.Random, conn, first_answer: bytes, client: scramp.ScramClient) -> bytes:
    client.set_server_first(first_answer.decode())
    return _mutate(rng, client.get_client_final().encode())


SASL_KINDS = ("handshake-truncated", "handshake-short-length", "handshake-long-length", "handshake-random-mechanism",
              "authenticate-truncated", "scram-first-random", "scram-final-mutated", "plain-no-nul",
              "plain-over-limit", "plain-long", "bytes-after-exchange", "authenticate-before-handshake", "random-frame")


def sasl_case(rng: random.Random, kind: str, conn, mechanism: str) -> list[tuple[str, object]]:
    hs = _frame(conn, SaslHandshakeRequest(mechanism=mechanism))
    auth = lambda token: _frame(conn, SaslAuthenticateRequest(auth_bytes=token), 101)  # noqa: E731
    if kind == "handshake-truncated":
        return [("raw", _sized(hs[:rng.randrange(1, len(hs))]))]
    if kind == "handshake-short-length":  # the rest is read as the next frame
        cut = rng.randrange(1, len(hs))
        return [("raw", struct.pack(">i", cut) + hs + _random_bytes(rng, 0, 16))]
    if kind == "handshake-long-length":
        return [("raw", struct.pack(">i", len(hs) + rng.randint(1, 4096)) + hs), ("shut", None)]
    if kind == "handshake-random-mechanism":
        name = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ-_0123456789") for _ in range(rng.randint(1, 40)))
        return [("raw", _sized(_frame(conn, SaslHandshakeRequest(mechanism=name))))]
    steps: list[tuple[str, object]] = [("ok", SaslHandshakeRequest(mechanism=mechanism))]
    if kind == "authenticate-truncated":
        a = auth(_random_bytes(rng, 1, 64))
        return steps + [("raw", _sized(a[:rng.randrange(1, len(a))]))]
    if kind == "scram-first-random":
        return steps + [("raw", _sized(auth(_random_bytes(rng, 0, 300))))]
    if kind == "scram-final-mutated":
        client = scramp.ScramClient([mechanism], "alice", USERS["alice"])
        return steps + [("scram-first", client), ("raw-scram-final", client)]
    if kind == "plain-no-nul":
        return steps + [("raw", _sized(auth(bytes(rng.randint(1, 255) for _ in range(rng.randint(0, 200))))))]
    if kind in ("plain-over-limit", "plain-long"):  # beyond sasl.server.max.receive.size (512 KiB), or below
        size = rng.randint(530_000, 700_000) if kind == "plain-over-limit" else rng.randint(10_000, 100_000)
        return steps + [("raw", _sized(auth(b"\0alice\0" + rng.randbytes(size))))]
    if kind == "bytes-after-exchange":
        steps.append(("ok", SaslAuthenticateRequest(auth_bytes=f"\0alice\0{USERS['alice']}".encode())))
        return steps + [("raw", _sized(rng.choice([_random_bytes(rng, 1, 200),
                                                    _mutate(rng, auth(_random_bytes(rng, 1, 40)))[:3] + b"\xff\xff"])))]
    if kind == "authenticate-before-handshake":
        return [("raw", _sized(auth(_random_bytes(rng, 0, 64))))]
    return [("raw", _sized(_random_bytes(rng, 1, 512)))]


def _error_code(frame: bytes, flexible: bool) -> int | None:
    """The error code of a SaslHandshake v1 / SaslAuthenticate v2 answer (first field of both)."""
    at = 4 + (1 if flexible else 0)
    return struct.unpack(">h", frame[at:at + 2])[0] if len(frame) >= at + 2 else None


def _drive(secure: SecureBroker, listener: str, rng: random.Random, kind: str, mechanism: str) -> str:
    """Runs one case on a fresh connection; returns its outcome ("answered 58, closed", ...), or
    raises AssertionError when the broker left the connection open or answered with success."""
    with _connect(secure, listener) as conn:
        answers: list[int | None] = []
        for step, arg in sasl_case(rng, kind, conn, mechanism):
            if step == "ok":
                r = conn.request(arg)
                assert r.error_code == 0, f"{kind}: a well-formed {type(arg).__name__} was refused: {r}"
            elif step == "scram-first":
                r = conn.request(SaslAuthenticateRequest(auth_bytes=arg.get_client_first().encode()))
                assert r.error_code == 0, r
                conn._scram_first = r.auth_bytes  # type: ignore[attr-defined]
            elif step == "raw-scram-final":
                final = _scram_final(rng, conn, conn._scram_first, arg)  # type: ignore[attr-defined]
                conn.send_raw(_sized(_frame(conn, SaslAuthenticateRequest(auth_bytes=final), 102)))
            elif step == "shut":
                socket.socket.shutdown(conn.sock, socket.SHUT_WR)  # TCP's half-close, under TLS too
            else:
                try:
                    conn.send_raw(arg)
                except (BrokenPipeError, ConnectionResetError, ssl.SSLError):
                    return "closed while sending"
        conn.sock.settimeout(10)
        try:
            while True:
                frame = conn.recv_frame()
                # correlation id 100: a SaslHandshake v1 answer; else SaslAuthenticate v2 (flexible)
                answers.append(_error_code(frame, flexible=frame[:4] != struct.pack(">i", 100)))
        except (kafka_wire.ConnectionClosed, ConnectionResetError, ssl.SSLError, ValueError):
            pass
        except (TimeoutError, socket.timeout):
            raise AssertionError(f"{listener} {mechanism} {kind}: the broker left the connection open "
                                 f"for 10 s (answers so far: {answers})") from None
    assert 0 not in answers, f"{listener} {mechanism} {kind}: a damaged request was answered with success"
    return f"answered {','.join(map(str, answers))}, closed" if answers else "closed"


def _failed_authentications(secure: SecureBroker, kafka_target: str, listener: str, mechanism: str) -> float:
    if kafka_target != "flotilla":
        return 0.0
    return metric(secure.broker.metrics_url, "flotilla_failed_authentication_total", listener=listener,
                  mechanism=mechanism) or 0.0


def _check_log(secure: SecureBroker, kafka_target: str) -> None:
    if kafka_target == "flotilla":
        failures = [line for line in secure.broker.log_text().splitlines() if FAILURE.search(line)]
        assert not failures, f"seed {SEED}: the broker logged failures:\n" + "\n".join(failures[:30])
    assert secure.broker.is_running(), secure.broker.log_tail(40)


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_fuzzed_sasl_exchanges_close_only_their_connection(secure, kafka_target, listener):
    seed = SEED + (listener == "SASL_SSL")
    print(f"SASL fuzz seed {seed} (FLOTILLA_SECURITY_FUZZ_SEED={SEED} reproduces this run)")
    rng = random.Random(seed)
    topic = make_topic(secure.broker, 1, f"fuzz-bystander-{listener.lower()}")
    before = {m: _failed_authentications(secure, kafka_target, listener, m) for m in ("PLAIN", "SCRAM-SHA-512")}
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    with Bystander(secure, topic) as bystander:
        wait_for("a first bystander delivery", lambda: bystander.delivered or bystander.errors, timeout=30)
        at_start = bystander.delivered
        for i in range(SASL_CASES):
            kind = SASL_KINDS[i % len(SASL_KINDS)]
            mechanism = "PLAIN" if kind.startswith("plain") or kind == "bytes-after-exchange" else \
                "SCRAM-SHA-512" if kind.startswith("scram") else rng.choice(["PLAIN", "SCRAM-SHA-512"])
            outcomes[kind][_drive(secure, listener, rng, kind, mechanism)] += 1
        during = bystander.delivered - at_start
    print({k: dict(v) for k, v in outcomes.items()})
    assert during > 0, "the bystander delivered nothing while the fuzz ran"
    assert not bystander.errors, bystander.errors
    _check_log(secure, kafka_target)
    # Kafka's answers where it gives one: the refused tokens answer SASL_AUTHENTICATION_FAILED.
    # A frame past sasl.server.max.receive.size closes without an answer; malformed frames and
    # requests out of turn close without one too.
    for kind in ("scram-first-random", "scram-final-mutated", "plain-no-nul", "plain-long"):
        assert set(outcomes[kind]) == {f"answered {SASL_AUTHENTICATION_FAILED}, closed"}, (kind, outcomes[kind])
    assert set(outcomes["handshake-random-mechanism"]) == {f"answered {UNSUPPORTED_SASL_MECHANISM}, closed"}
    for kind in ("plain-over-limit", "handshake-truncated", "handshake-long-length", "authenticate-truncated",
                 "authenticate-before-handshake"):
        assert set(outcomes[kind]) <= {"closed", "closed while sending"}, (kind, outcomes[kind])
    if kafka_target == "flotilla":
        refused = {m: sum(n for kind, c in outcomes.items() for o, n in c.items()
                          if o == f"answered {SASL_AUTHENTICATION_FAILED}, closed"
                          and (kind.startswith("plain") if m == "PLAIN" else kind.startswith("scram")))
                   for m in before}
        for m, n in refused.items():
            after = _failed_authentications(secure, kafka_target, listener, m)
            assert after - before[m] >= n, f"{m}: failed authentications counted {after - before[m]}, refused {n}"


def _client_hello(rng: random.Random) -> bytes:
    ctx = ssl.create_default_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


TLS_KINDS = ("random-bytes", "truncated-client-hello", "mutated-client-hello", "http-request")


def _tls_garbage(rng: random.Random, kind: str) -> tuple[bytes, bool]:
    """Bytes for a TLS listener and whether the client then half-closes (a ClientHello cut short
    promises more bytes: the broker rightly waits for them until the client goes)."""
    if kind == "random-bytes":
        b = bytearray(_random_bytes(rng, 1, 4096))
        b[0] = rng.choice([x for x in range(256) if x not in (0x14, 0x15, 0x16, 0x17)])  # no TLS record type
        return bytes(b), False
    hello = _client_hello(rng)
    if kind == "truncated-client-hello":
        return hello[:rng.randrange(1, len(hello))], True
    if kind == "mutated-client-hello":
        return _mutate(rng, hello), True
    return (f"GET /{rng.randint(0, 999)} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: fuzz\r\n\r\n").encode(), False


@pytest.mark.parametrize("listener", ["SSL", "SASL_SSL"])
def test_tls_garbage_closes_only_that_connection(secure, kafka_target, listener):
    rng = random.Random(SEED + 7 + (listener == "SASL_SSL"))
    topic = make_topic(secure.broker, 1, f"tls-bystander-{listener.lower()}")
    before = _failed_authentications(secure, kafka_target, listener, "TLS")
    outcomes: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    with Bystander(secure, topic) as bystander:
        wait_for("a first bystander delivery", lambda: bystander.delivered or bystander.errors, timeout=30)
        at_start = bystander.delivered
        for i in range(TLS_CASES):
            kind = TLS_KINDS[i % len(TLS_KINDS)]
            data, half_close = _tls_garbage(rng, kind)
            with socket.create_connection(("127.0.0.1", secure.ports[listener]), timeout=10) as s:
                try:
                    s.sendall(data)
                    if half_close:
                        s.shutdown(socket.SHUT_WR)
                    answer = b""
                    while chunk := s.recv(65536):
                        answer += chunk
                    outcome = "alert, closed" if answer[:1] == b"\x15" else f"{len(answer)} bytes, closed" \
                        if answer else "closed"
                except ConnectionResetError:
                    outcome = "reset"
                except (TimeoutError, socket.timeout):
                    raise AssertionError(f"{listener} {kind}: the broker left the connection open for 10 s") from None
            outcomes[kind][outcome] += 1
        during = bystander.delivered - at_start
    print({k: dict(v) for k, v in outcomes.items()})
    assert during > 0, "the bystander delivered nothing while the garbage was sent"
    assert not bystander.errors, bystander.errors
    _check_log(secure, kafka_target)
    # Not TLS at all: Kafka (Java) answers an alert, Flotilla (OpenSSL, which sends none for a first
    # record that is not TLS) just closes; a ClientHello cut short gets nothing before the close.
    for kind in ("random-bytes", "http-request"):
        assert set(outcomes[kind]) <= {"alert, closed", "closed", "reset"}, (kind, outcomes[kind])
    assert set(outcomes["truncated-client-hello"]) <= {"closed", "reset"}, outcomes["truncated-client-hello"]
    # (a ClientHello that survived its mutation gets the server's first flight before the close)
    if kafka_target == "flotilla":
        after = _failed_authentications(secure, kafka_target, listener, "TLS")
        assert after - before >= TLS_CASES // 2, f"TLS failures counted {after - before} of {TLS_CASES}"
