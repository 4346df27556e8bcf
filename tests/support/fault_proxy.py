"""A TCP proxy in front of a broker that loses Produce responses on purpose.

The broker advertises the proxy's port, so every client connection goes through it. For the first
`drop_produce_responses` Produce requests, the proxy forwards the request, waits for the broker's
answer, and then closes the client's connection instead of delivering it: the records are in the
log, the client does not know, and it must retry. An idempotent producer's retry must not add a
second copy; a non-idempotent one does (which shows the proxy really forces retries).

Loopback only, bounded: the proxy stops with the test.
"""

from __future__ import annotations

import socket
import struct
import threading

from flotilla.testenv.brokers.broker_process import free_port

PRODUCE = 0


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _recv_exactly(sock, 4)
    if head is None:
        return None
    (size,) = struct.unpack(">i", head)
    if size < 0 or size > 256 * 1024 * 1024:
        return None
    body = _recv_exactly(sock, size)
    return None if body is None else head + body


class FaultProxy:
    def __init__(self, target_port: int, target_host: str = "127.0.0.1", drop_produce_responses: int = 0):
        self.target = (target_host, target_port)
        self.port = free_port()
        self.drop_budget = drop_produce_responses
        self.dropped = 0
        self.produce_requests = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", self.port))
        self._listener.listen(64)
        self._listener.settimeout(0.2)
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept_loop, name="fault-proxy", daemon=True)

    def start(self) -> "FaultProxy":
        self._thread.start()
        return self

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            client.settimeout(None)
            with self._lock:
                self._sockets += [client, upstream]
            doomed: set[int] = set()
            threading.Thread(target=self._client_to_broker, args=(client, upstream, doomed), daemon=True).start()
            threading.Thread(target=self._broker_to_client, args=(upstream, client, doomed), daemon=True).start()

    @staticmethod
    def _close(*socks: socket.socket) -> None:
        for s in socks:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            try:
                s.close()
            except OSError:
                pass

    def _client_to_broker(self, client: socket.socket, upstream: socket.socket, doomed: set[int]) -> None:
        try:
            while True:
                frame = _read_frame(client)
                if frame is None:
                    break
                api_key, _version, correlation_id = struct.unpack(">hhi", frame[4:12])
                if api_key == PRODUCE:
                    with self._lock:
                        self.produce_requests += 1
                        # One doomed request per connection: the connection dies with its answer,
                        # so a second one would be lost without being counted.
                        if self.drop_budget > 0 and not doomed:
                            self.drop_budget -= 1
                            doomed.add(correlation_id)
                upstream.sendall(frame)
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    def _broker_to_client(self, upstream: socket.socket, client: socket.socket, doomed: set[int]) -> None:
        try:
            while True:
                frame = _read_frame(upstream)
                if frame is None:
                    break
                (correlation_id,) = struct.unpack(">i", frame[4:8])
                if correlation_id in doomed:
                    with self._lock:
                        self.dropped += 1
                    break  # the broker appended; the client never hears of it
                client.sendall(frame)
        except OSError:
            pass
        finally:
            self._close(client, upstream)

    def stop(self) -> None:
        self._stop.set()
        self._close(self._listener)
        with self._lock:
            socks, self._sockets = self._sockets, []
        self._close(*socks)
        self._thread.join(5)

    def __enter__(self) -> "FaultProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
