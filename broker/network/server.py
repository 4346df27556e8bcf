"""Listening sockets: accept connections and hand each to a Connection loop."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker.config import BrokerConfig
from broker.network.connection import Connection

if TYPE_CHECKING:
    from broker.server.apis import RequestDispatcher
    from broker.server.metrics import BrokerMetrics

log = logging.getLogger(__name__)


class SocketServer:
    def __init__(self, config: BrokerConfig, dispatcher: "RequestDispatcher", metrics: "BrokerMetrics") -> None:
        self.config = config
        self.dispatcher = dispatcher
        self.metrics = metrics
        self.servers: list[asyncio.base_events.Server] = []
        self.connections: set[Connection] = set()
        self._tasks: dict[Connection, asyncio.Task] = {}
        self.bound: list[tuple[str, str, int]] = []

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

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, listener_name: str) -> None:
        conn = Connection(
            reader, writer, self.dispatcher,
            max_request_bytes=self.config["socket.request.max.bytes"],
            idle_timeout_s=self.config["connections.max.idle.ms"] / 1000,
            listener_name=listener_name,
        )
        self.connections.add(conn)
        self.metrics.connections.inc()
        task = asyncio.current_task()
        if task is not None:
            self._tasks[conn] = task
        try:
            await conn.serve()
        finally:
            self.connections.discard(conn)
            self.metrics.connections.dec()
            self._tasks.pop(conn, None)

    def stop_accepting(self) -> None:
        for s in self.servers:
            s.close()

    async def close_connections(self, grace_s: float = 5.0) -> None:
        """Close idle connections now; let in-flight requests finish (bounded), then close the rest."""
        for conn, task in list(self._tasks.items()):
            conn.closing = True
            if not conn.busy:
                task.cancel()
        busy = [t for c, t in self._tasks.items() if c.busy]
        if busy:
            _, pending = await asyncio.wait(busy, timeout=grace_s)
            for t in pending:
                t.cancel()
        for c in list(self.connections):
            await c.close()
