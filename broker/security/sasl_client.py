"""The client side of SASL on a Kafka connection (KIP-43/152): SaslHandshake, then the mechanism's
tokens in SaslAuthenticate frames, as Kafka's clients send them.

Shared by everything that dials a broker as a client with credentials: a broker's inter-broker
connections (broker/network/client.py) and the operator's admin client. `exchange` sends one kio
request on the caller's connection and returns the response, so this module owns no socket.
PLAIN is RFC 4616's single token; SCRAM (RFC 5802/7677) is scramp's client.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

Exchange = Callable[[Any], Awaitable[Any]]


class SaslAuthenticationFailed(Exception):
    """The broker refused the mechanism or the credentials, or its SCRAM proof did not verify."""


async def authenticate(exchange: Exchange, mechanism: str, username: str, password: str, where: str) -> None:
    """Authenticate as `username` with `mechanism`; SaslAuthenticationFailed naming `where` (the
    peer, and the listener when the caller knows it) and the broker's answer when refused."""
    from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
    from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

    if mechanism not in SUPPORTED:
        raise SaslAuthenticationFailed(f"{where}: SASL mechanism {mechanism} is not supported here "
                                       f"(use {', '.join(SUPPORTED)})")
    hs = await exchange(SaslHandshakeRequest(mechanism=mechanism))
    if int(hs.error_code) != 0:
        raise SaslAuthenticationFailed(f"{where}: SASL mechanism {mechanism} refused (error {int(hs.error_code)}; "
                                       f"enabled: {', '.join(hs.mechanisms) or 'none'})")

    async def send(token: bytes) -> bytes:
        resp = await exchange(SaslAuthenticateRequest(auth_bytes=token))
        if int(resp.error_code) != 0:
            raise SaslAuthenticationFailed(f"{where}: authentication failed as {username} ({mechanism}): "
                                           f"{resp.error_message}")
        return resp.auth_bytes

    if mechanism == "PLAIN":
        await send(f"\0{username}\0{password}".encode())
        return
    import scramp

    client = scramp.ScramClient([mechanism], username, password)
    first = await send(client.get_client_first().encode())
    try:
        client.set_server_first(first.decode())
        final = client.get_client_final()
    except scramp.ScramException as e:
        raise SaslAuthenticationFailed(f"{where}: SCRAM exchange failed: {e}") from None
    last = await send(final.encode())
    try:
        client.set_server_final(last.decode())
    except scramp.ScramException as e:
        raise SaslAuthenticationFailed(f"{where}: the broker's SCRAM proof did not verify: {e}") from None
