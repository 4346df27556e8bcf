"""A refused TLS handshake tells the client why: the broker's start_tls sends OpenSSL's alert before
closing (asyncio's own drops it, and the Java client then retries a 'network failure' until it
times out instead of failing with SslAuthenticationException, as it does against Kafka)."""

import asyncio
import ssl

import pytest

from broker.security.listeners import ListenerSecurity
from broker.security.transport import TlsHandshakeFailed, start_tls, tls_principal
from flotilla.testenv.brokers.tls_certs import make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _mtls(pki) -> ListenerSecurity:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(pki.broker_keystore)
    ctx.load_verify_locations(pki.ca_file)
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ListenerSecurity(name="MTLS", protocol="SSL", ssl_context=ctx)


async def _connect(pki, security: ListenerSecurity, cert: str | None, version: ssl.TLSVersion) -> tuple[str, list]:
    """What a Python client reads after its side of the handshake ("ok" + the server's verdict)."""
    outcomes: list = []

    async def on_client(reader, writer):
        try:
            await start_tls(writer, security, timeout_s=10)
            outcomes.append(tls_principal(writer, security).name)
            writer.write(b"ok")
            await writer.drain()
        except TlsHandshakeFailed as e:
            outcomes.append(e)
        writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = ssl.create_default_context(cafile=str(pki.ca_file))
    client.maximum_version = version
    if cert:
        client.load_cert_chain(pki.client_cert(cert), pki.client_key(cert))
    try:
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
            got = await asyncio.wait_for(reader.read(2), 10)
            writer.close()
            return (got.decode() or "closed without an alert"), outcomes
        except ssl.SSLError as e:
            return e.reason or str(e), outcomes
    finally:
        server.close()


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_2], ids=["TLSv1.3", "TLSv1.2"])
@pytest.mark.parametrize("cert,alert", [
    ("expired", "SSLV3_ALERT_CERTIFICATE_EXPIRED"),
    ("mallory", "TLSV1_ALERT_UNKNOWN_CA"),
    (None, "ALERT"),  # TLS 1.3: certificate required; TLS 1.2: handshake failure
])
async def test_refused_client_certificate_gets_an_alert(pki, cert, alert, version):
    got, outcomes = await _connect(pki, _mtls(pki), cert, version)
    assert alert in got, f"the client read {got!r}, not an alert naming {alert}"
    assert len(outcomes) == 1 and isinstance(outcomes[0], TlsHandshakeFailed), outcomes


async def test_valid_client_certificate_is_served(pki):
    got, outcomes = await _connect(pki, _mtls(pki), "alice", ssl.TLSVersion.TLSv1_3)
    assert (got, outcomes) == ("ok", ["CN=alice,OU=clients,O=Flotilla Tests"])
