"""Broker-to-broker connections notice a silent network cut within seconds (issue 35): the
socket of a connected KafkaConnection has keep-alive probes and a user timeout set, sized in
seconds, not TCP's minutes."""

from __future__ import annotations

import asyncio
import socket

from broker.network import client


async def test_a_connection_has_keepalive_and_a_user_timeout():
    async def serve(reader, writer):
        await reader.read()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    conn = client.KafkaConnection("127.0.0.1", port, "test")
    await conn.connect(5)
    try:
        sock = conn._writer.get_extra_info("socket")
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == client.KEEPALIVE_IDLE_S
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == client.USER_TIMEOUT_MS
        # dead within about ten seconds of silence, whichever fires first
        assert client.KEEPALIVE_IDLE_S + client.KEEPALIVE_INTERVAL_S * client.KEEPALIVE_COUNT <= 10
        assert client.USER_TIMEOUT_MS <= 10_000
    finally:
        conn.close()
        server.close()
        await server.wait_closed()
