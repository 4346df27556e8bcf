"""TLS contexts from Kafka's ssl.* keys: each keystore form loads, and a real handshake works."""

import asyncio
import ssl

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.config import ConfigError, parse_config
from broker.security.listeners import listener_security
from broker.security.tls import normalize_pem, server_context
from flotilla.testenv.brokers.tls_certs import KEY_PASSWORD, make_pki


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


def _ctx(settings: dict[str, str], client_auth: str = "none"):
    cfg = parse_config({"listeners": "SSL://127.0.0.1:0", **settings})
    return server_context(lambda k: cfg.listener_value("SSL", k), "listener SSL", client_auth)


async def _handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext) -> str:
    """A real TLS handshake on loopback; the subject the server saw ("" without a client certificate)."""
    seen = asyncio.get_running_loop().create_future()

    async def on_client(reader, writer):
        cert = writer.get_extra_info("peercert")
        seen.set_result(dict(x[0] for x in cert["subject"])["commonName"] if cert else "")
        writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_ctx, server_hostname="localhost")
        result = await asyncio.wait_for(seen, 10)
        writer.close()
        return result
    finally:
        server.close()


def _client(pki, cert: str | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki.ca_file))
    if cert:
        ctx.load_cert_chain(pki.client_cert(cert), pki.client_key(cert))
    return ctx


async def test_pem_keystore_file_serves_tls(pki):
    ctx = _ctx({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore)})
    assert await _handshake(ctx, _client(pki)) == ""


async def test_encrypted_pem_key_with_ssl_key_password(pki):
    settings = {"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore_encrypted)}
    with pytest.raises(ConfigError, match="cannot load TLS keys"):
        _ctx({**settings, "ssl.key.password": "wrong"})
    ctx = _ctx({**settings, "ssl.key.password": KEY_PASSWORD})
    assert await _handshake(ctx, _client(pki)) == ""


async def test_inline_pem_even_on_one_line(pki):
    chain = (pki.broker.cert_pem() + pki.ca.cert_pem()).decode().replace("\n", " ")
    ctx = _ctx({"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": chain,
                "ssl.keystore.key": pki.broker.key_pem().decode(),
                "ssl.truststore.type": "PEM", "ssl.truststore.certificates": pki.ca.cert_pem().decode()},
               client_auth="required")
    assert await _handshake(ctx, _client(pki, "alice")) == "alice"


async def test_pkcs12_keystore(pki, tmp_path):
    p12 = tmp_path / "broker.p12"
    p12.write_bytes(pkcs12.serialize_key_and_certificates(
        b"broker", pki.broker.key, pki.broker.cert, [pki.ca.cert],
        serialization.BestAvailableEncryption(b"store-secret")))
    ctx = _ctx({"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(p12),
                "ssl.keystore.password": "store-secret"})
    assert await _handshake(ctx, _client(pki)) == ""


async def test_client_auth_required_refuses_untrusted_and_missing_certificates(pki):
    ctx = _ctx({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file)}, client_auth="required")
    assert await _handshake(ctx, _client(pki, "alice")) == "alice"
    accepted = []

    async def on_client(reader, writer):
        accepted.append(writer)
        writer.close()

    server = await asyncio.start_server(on_client, "127.0.0.1", 0, ssl=ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        for client in (_client(pki, "mallory"), _client(pki)):
            # TLS 1.3: the client finishes its side first and then reads the server's alert.
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname="localhost")
            with pytest.raises((ssl.SSLError, ConnectionError)):
                if not await asyncio.wait_for(reader.read(1), 10):
                    raise ConnectionError("closed without an alert")
            writer.close()
        assert accepted == []  # the server never handed such a connection on
    finally:
        server.close()


@pytest.mark.parametrize("settings,error", [
    ({}, "needs a keystore"),
    ({"ssl.keystore.location": "/x.jks"}, "JKS cannot be read; use PEM"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "/does/not/exist"}, "cannot load TLS keys"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "k"}, "inline keys need"),
    ({"ssl.keystore.type": "PEM", "ssl.keystore.location": "KEYSTORE", "ssl.enabled.protocols": "TLSv1.1"},
     "ssl.enabled.protocols"),
])
def test_bad_keystores_name_the_problem(pki, settings, error):
    settings = {k: v.replace("KEYSTORE", str(pki.broker_keystore)) for k, v in settings.items()}
    with pytest.raises(ConfigError, match=error):
        _ctx(settings)


def test_mtls_needs_a_truststore(pki):
    with pytest.raises(ConfigError, match="needs a truststore"):
        _ctx({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore)}, client_auth="required")


def test_normalize_pem_rewraps_base64():
    text = "-----BEGIN CERTIFICATE----- QUJD REVG\nR0g=\\nSUo= -----END CERTIFICATE-----"
    assert normalize_pem(text) == "-----BEGIN CERTIFICATE-----\nQUJDREVGR0g=SUo=\n-----END CERTIFICATE-----\n"


def test_listener_security_per_listener(pki, tmp_path):
    scram = tmp_path / "scram"
    scram.write_text("SCRAM-SHA-512=[name=alice,password=alice-secret]\n")
    cfg = parse_config({
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,MTLS:SSL,SASL_SSL:SASL_SSL",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.broker_keystore),
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_file),
        "ssl.client.auth": "required",  # applies to MTLS, not to SASL_SSL (KIP-684)
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";',
        "flotilla.sasl.scram.credentials.file": str(scram),
    })
    sec = listener_security(cfg)
    assert (sec["PLAINTEXT"].tls, sec["PLAINTEXT"].sasl) == (False, False)
    assert sec["SASL_PLAINTEXT"].mechanisms == ("PLAIN",) and sec["SASL_PLAINTEXT"].plain_users.check("bob", "bob-secret")
    assert sec["MTLS"].ssl_context.verify_mode == ssl.CERT_REQUIRED
    assert sec["SASL_SSL"].ssl_context.verify_mode == ssl.CERT_NONE
    assert sec["SASL_SSL"].mechanisms == ("SCRAM-SHA-512",) and sec["SASL_SSL"].scram.lookup("SCRAM-SHA-512", "alice")


@pytest.mark.parametrize("settings,error", [
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"}, "GSSAPI not served"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}, "plain.sasl.jaas.config"),
    ({"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-256",
      "flotilla.sasl.scram.credentials.file": "/does/not/exist"}, "credentials.file"),
])
def test_sasl_listener_misconfiguration(settings, error):
    with pytest.raises(ConfigError, match=error):
        listener_security(parse_config(settings))
