"""A listener's TLS server context from Kafka's `ssl.*` keys, for asyncio's ssl support.

Keystores: `ssl.keystore.type=PEM` with `ssl.keystore.location` (one file holding the private key
and the certificate chain; `ssl.key.password` decrypts the key) or the PEM text inline in
`ssl.keystore.certificate.chain` and `ssl.keystore.key`; or `PKCS12` (`ssl.keystore.password`).
Truststores (the CAs client certificates must chain to): `PEM` at `ssl.truststore.location` or
inline in `ssl.truststore.certificates`, or `PKCS12`. JKS, Kafka's default type, cannot be read
here and is refused with a message saying what to use instead. `ssl.client.auth`: none,
requested or required (mTLS). `ssl.enabled.protocols` bounds the TLS versions.

Python's ssl module loads keys only from files; inline and PKCS12 material is written to a
private temporary file (0600) just long enough to load it.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from pathlib import Path
from typing import Any, Callable

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.serialization import pkcs12

from broker.config import ConfigError

_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)
TLS_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def normalize_pem(text: str) -> str:
    """PEM blocks with their base64 re-wrapped, so inline PEM may come with its line breaks, on one
    line, with properties-file continuation lines or with `\\n` escapes (a properties file's
    newline, which Kafka's Java properties reader decodes)."""
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        b64 = re.sub(r"\\[nrt]|\s+", "", body)
        lines = [b64[i:i + 64] for i in range(0, len(b64), 64)]
        blocks.append(f"-----BEGIN {label}-----\n" + "\n".join(lines) + f"\n-----END {label}-----\n")
    return "".join(blocks)


def _with_private_file(data: bytes, use: Callable[[str], None]) -> None:
    with tempfile.TemporaryDirectory(prefix="flotilla-tls-") as d:
        path = os.path.join(d, "material.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        use(path)


def _password(value: str) -> bytes | None:
    return value.encode() if value else None


def load_keystore(ctx: ssl.SSLContext, get: Callable[[str], Any], where: str) -> None:
    kind = get("ssl.keystore.type").upper()
    location = get("ssl.keystore.location")
    chain, key = get("ssl.keystore.certificate.chain"), get("ssl.keystore.key")
    key_password = get("ssl.key.password")
    if chain or key:
        if kind != "PEM" or not (chain and key) or location:
            raise ConfigError(f"{where}: inline keys need ssl.keystore.type=PEM with both ssl.keystore.certificate.chain "
                              "and ssl.keystore.key, and no ssl.keystore.location")
        material = (normalize_pem(key) + normalize_pem(chain)).encode()
        _with_private_file(material, lambda p: ctx.load_cert_chain(p, password=_password(key_password)))
        return
    if not location:
        raise ConfigError(f"{where}: a TLS listener needs a keystore: ssl.keystore.location, or "
                          "ssl.keystore.certificate.chain and ssl.keystore.key (ssl.keystore.type=PEM)")
    if kind == "PEM":
        ctx.load_cert_chain(location, password=_password(key_password))
    elif kind == "PKCS12":
        private_key, cert, extra = pkcs12.load_key_and_certificates(
            Path(location).read_bytes(), _password(get("ssl.keystore.password")))
        if private_key is None or cert is None:
            raise ConfigError(f"{where}: the PKCS12 keystore {location} holds no private key with its certificate")
        pem = private_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                        serialization.NoEncryption())
        pem += b"".join(c.public_bytes(serialization.Encoding.PEM) for c in [cert, *(extra or [])])
        _with_private_file(pem, ctx.load_cert_chain)
    else:
        raise ConfigError(f"{where}: ssl.keystore.type={kind} cannot be read; use PEM (or PKCS12: "
                          "keytool -importkeystore -deststoretype PKCS12)")


def load_truststore(ctx: ssl.SSLContext, get: Callable[[str], Any], where: str) -> bool:
    kind = get("ssl.truststore.type").upper()
    location, inline = get("ssl.truststore.location"), get("ssl.truststore.certificates")
    if inline:
        if kind != "PEM" or location:
            raise ConfigError(f"{where}: ssl.truststore.certificates needs ssl.truststore.type=PEM and no "
                              "ssl.truststore.location")
        ctx.load_verify_locations(cadata=normalize_pem(inline))
        return True
    if not location:
        return False
    if kind == "PEM":
        ctx.load_verify_locations(cafile=location)
    elif kind == "PKCS12":
        _, cert, extra = pkcs12.load_key_and_certificates(
            Path(location).read_bytes(), _password(get("ssl.truststore.password")))
        certs = [c for c in [cert, *(extra or [])] if c is not None]
        ctx.load_verify_locations(cadata="".join(c.public_bytes(serialization.Encoding.PEM).decode() for c in certs))
    else:
        raise ConfigError(f"{where}: ssl.truststore.type={kind} cannot be read; use PEM (or PKCS12)")
    return True


def server_context(get: Callable[[str], Any], where: str, client_auth: str) -> ssl.SSLContext:
    """The SSLContext of one listener. `get(key)` answers the listener's value of an ssl.* key
    (its `listener.name.<l>.` form first); `where` names the listener in errors."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = [v.strip() for v in get("ssl.enabled.protocols").split(",") if v.strip()]
    unknown = [v for v in versions if v not in TLS_VERSIONS]
    if unknown or not versions:
        raise ConfigError(f"{where}: ssl.enabled.protocols {unknown or versions} must name TLSv1.2 and/or TLSv1.3")
    ctx.minimum_version = min(TLS_VERSIONS[v] for v in versions)
    ctx.maximum_version = max(TLS_VERSIONS[v] for v in versions)
    try:
        load_keystore(ctx, get, where)
        has_truststore = load_truststore(ctx, get, where)
    except (OSError, ValueError) as e:  # ssl.SSLError is an OSError; cryptography raises ValueError
        raise ConfigError(f"{where}: cannot load TLS keys or certificates: {e}") from None
    if client_auth not in _CLIENT_AUTH:
        raise ConfigError(f"{where}: ssl.client.auth={client_auth!r} must be none, requested or required")
    if client_auth != "none" and not has_truststore:
        raise ConfigError(f"{where}: ssl.client.auth={client_auth} needs a truststore (ssl.truststore.location "
                          "or ssl.truststore.certificates) to check client certificates against")
    ctx.verify_mode = _CLIENT_AUTH[client_auth]
    return ctx
