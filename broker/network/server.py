"""Listening sockets: accept connections and hand each to a Connection loop; one reaper task
closes connections silent for connections.max.idle.ms (no timer per read)."""

from __future__ import annotations

import asyncio
import logging

from broker.config import BrokerConfig
from broker.network.connection import Connection, Dispatcher, NetworkMetrics
from broker.network.memory_pool import RequestMemoryPool
from broker.security.listeners import listener_security
from broker.security.principal import ANONYMOUS
from broker.security.transport import TlsHandshakeFailed, start_tls, tls_principal

log = logging.getLogger(__name__)


class SocketServer:
    def __init__(self, config: BrokerConfig, dispatcher: Dispatcher, metrics: NetworkMetrics) -> None:
        self.config = config
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[Connection] = set()
        self._tasks: dict[Connection, asyncio.Task] = {}
        self.bound: list[tuple[str, str, int]] = []
        self.memory_pool = RequestMemoryPool(config["queued.max.request.bytes"])
        metrics.request_memory_used.set_function(lambda: self.memory_pool.used)
        self.idle_timeout_s = config["connections.max.idle.ms"] / 1000
        self._reaper: asyncio.Task | None = None
        # TLS and SASL per listener (broker/security/); a bad setting raises ConfigError before any bind.
        self.security = listener_security(config)

    async def start(self) -> None:
        for listener in self.config.listeners:
            server = await asyncio.start_server(
                lambda r, w, name=listener.name: self._accept(r, w, name),
                host=listener.host or None,
                port=listener.port,
                reuse_address=True,
                limit=2**20,
            )
            self.servers.append(server)
            sock = server.sockets[0].getsockname()
            self.bound.append((listener.name, sock[0], sock[1]))
        self._reaper = asyncio.create_task(self._reap_idle(), name="idle-connection-reaper")

    async def _reap_idle(self) -> None:
        """Close connections from which nothing arrived for connections.max.idle.ms (Kafka's
        idle expiry): between frames, or in the middle of one whose body stalled."""
        interval = min(max(self.idle_timeout_s / 10, 0.05), 5.0)
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(interval)
            now = loop.time()
            for conn in list(self.connections):
                if conn.idle_for(now) > self.idle_timeout_s:
                    if conn.in_frame:
                        log.info("closing connection %s from %s: its frame stalled, nothing arrived for %.1f s "
                                 "(connections.max.idle.ms)", conn.id, conn.peer, self.idle_timeout_s)
                    else:
                        log.info("closing idle connection %s from %s", conn.id, conn.peer)
                    conn.closing = True
                    conn.writer.close()  # the pending read ends; serve() returns and cleans up

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str) -> None:
        security = self.security[listener_name]
        principal = ANONYMOUS
        if security.tls:
            try:
                await start_tls(writer, security, timeout_s=min(self.idle_timeout_s, 60.0))
                principal = tls_principal(writer, security)
            except asyncio.CancelledError:
                writer.close()
                return
            except (TlsHandshakeFailed, ValueError) as e:  # ValueError: no ssl.principal.mapping.rules matched
                peer = writer.get_extra_info("peername")
                log.info("failed authentication with %s on listener %s: TLS handshake failed: %s",
                         f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else peer, listener_name, e)
                self.metrics.authentications(listener_name, "TLS", ok=False)
                writer.close()
                return
            if principal is not ANONYMOUS:
                self.metrics.authentications(listener_name, "TLS", ok=True)
        conn = Connection(
            reader, writer, self.dispatcher,
            max_request_bytes=self.config["socket.request.max.bytes"],
            idle_timeout_s=self.idle_timeout_s,
            listener_name=listener_name,
            memory_pool=self.memory_pool,
            security=security,
            principal=principal,
        )
        self.connections.add(conn)
        self.metrics.connections.inc()
        task = asyncio.current_task()
        if task is not None:
            self._tasks[conn] = task
        try:
            await conn.serve()
        except asyncio.CancelledError:
            # Only shutdown cancels these tasks; asyncio's stream callback would log a re-raised
            # cancellation as an error with a traceback, once per connection.
            pass
        finally:
            self.connections.discard(conn)
            self.metrics.connections.dec()
            self._tasks.pop(conn, None)

    def stop_accepting(self) -> None:
        for s in self.servers:
            s.close()

    async def close_connections(self, grace_s: float = 5.0) -> None:
        """Close idle connections now; let in-flight requests finish (bounded), then close the rest.

        Connections are closed, not their tasks cancelled: a closed socket ends the pending read
        and each loop returns normally."""
        if self._reaper is not None:
            self._reaper.cancel()
        for conn in list(self._tasks):
            conn.closing = True
            if not conn.busy:
                conn.writer.close()
        busy = [t for c, t in self._tasks.items() if c.busy]
        if busy:
            _, pending = await asyncio.wait(busy, timeout=grace_s)
            for t in pending:
                t.cancel()
        await asyncio.gather(*(c.close() for c in list(self.connections)))
        remaining = list(self._tasks.values())
        if remaining:
            await asyncio.wait(remaining, timeout=grace_s)
