"""TLS on an accepted connection: the handshake, and the principal a client certificate gives.

The handshake runs after accept (asyncio's start_tls) rather than inside the listening server, so
that a failed one (a plaintext client on a TLS port, an untrusted or missing client certificate)
is logged with its peer and counted, and only that connection closes.

A failed handshake sends the client OpenSSL's alert (certificate expired, unknown CA, certificate
required) before closing, as Kafka does. asyncio's own start_tls drops it (its SSLProtocol closes on
the error without writing what OpenSSL queued), and under TLS 1.3, where the client finishes its
side before the server checks its certificate, a bare close reads as a network failure: the Java
client retries until its timeout instead of failing with SslAuthenticationException.
"""

from __future__ import annotations

import asyncio
import ssl
from asyncio import sslproto

from broker.security.listeners import ListenerSecurity
from broker.security.principal import ANONYMOUS, KafkaPrincipal, certificate_subject, user


class TlsHandshakeFailed(Exception):
    """The TLS handshake did not complete; the message says why (OpenSSL's reason)."""


class _AlertingSSLProtocol(sslproto.SSLProtocol):
    """asyncio's TLS protocol, except that a failed handshake first sends the alert OpenSSL queued."""

    def _do_handshake(self) -> None:
        try:
            self._sslobj.do_handshake()
        except sslproto.SSLAgainErrors:
            self._process_outgoing()
        except ssl.SSLError as exc:
            self._process_outgoing()
            self._on_handshake_complete(exc)
        else:
            self._on_handshake_complete(None)


async def _server_start_tls(writer: asyncio.StreamWriter, context: ssl.SSLContext, timeout_s: float) -> None:
    """StreamWriter.start_tls (server side) with _AlertingSSLProtocol: the steps of asyncio's
    loop.start_tls, whose protocol class cannot be chosen."""
    loop = asyncio.get_running_loop()
    transport, protocol = writer.transport, writer._protocol  # type: ignore[attr-defined]
    await writer.drain()
    waiter = loop.create_future()
    tls = _AlertingSSLProtocol(loop, protocol, context, waiter, server_side=True,
                               ssl_handshake_timeout=timeout_s, call_connection_made=False)
    transport.pause_reading()  # no data_received before connection_made
    transport.set_protocol(tls)
    made = loop.call_soon(tls.connection_made, transport)
    resume = loop.call_soon(transport.resume_reading)
    try:
        await waiter
    except BaseException:
        transport.close()
        made.cancel()
        resume.cancel()
        raise
    writer._transport = tls._app_transport  # type: ignore[attr-defined]
    protocol._replace_writer(writer)


def _alerting_supported(writer: asyncio.StreamWriter) -> bool:
    """The asyncio internals _server_start_tls relies on are there (CPython's pure-Python loop)."""
    return (hasattr(sslproto.SSLProtocol, "_do_handshake") and hasattr(sslproto, "SSLAgainErrors")
            and hasattr(getattr(writer, "_protocol", None), "_replace_writer")
            and getattr(writer.transport, "_start_tls_compatible", False))


async def start_tls(writer: asyncio.StreamWriter, security: ListenerSecurity, timeout_s: float) -> None:
    assert security.ssl_context is not None
    try:
        if _alerting_supported(writer):
            await _server_start_tls(writer, security.ssl_context, timeout_s)
        else:
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
