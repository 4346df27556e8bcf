"""TLS on an accepted connection: the handshake, and the principal a client certificate gives.

The handshake runs after accept (asyncio's start_tls) rather than inside the listening server, so
that a failed one (a plaintext client on a TLS port, an untrusted or missing client certificate)
is logged with its peer and counted, and only that connection closes.
"""

from __future__ import annotations

import asyncio
import ssl

from broker.security.listeners import ListenerSecurity
from broker.security.principal import ANONYMOUS, KafkaPrincipal, certificate_subject, user


class TlsHandshakeFailed(Exception):
    """The TLS handshake did not complete; the message says why (OpenSSL's reason)."""


async def start_tls(writer: asyncio.StreamWriter, security: ListenerSecurity, timeout_s: float) -> None:
    assert security.ssl_context is not None
    try:
        await writer.start_tls(security.ssl_context, ssl_handshake_timeout=timeout_s)
    except ssl.SSLError as e:
        raise TlsHandshakeFailed(e.reason or str(e)) from None
    except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, OSError) as e:
        raise TlsHandshakeFailed(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None


def tls_principal(writer: asyncio.StreamWriter, security: ListenerSecurity) -> KafkaPrincipal:
    """User:<mapped subject> when the client sent a certificate on an SSL listener, else ANONYMOUS
    (SASL_SSL connections get their principal from SASL)."""
    ssl_object = writer.get_extra_info("ssl_object")
    if security.protocol != "SSL" or ssl_object is None:
        return ANONYMOUS
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return ANONYMOUS
    return user(security.principal_mapper.name(certificate_subject(der)))
