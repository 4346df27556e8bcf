"""Credentials the SASL mechanisms check against, kept apart from the mechanisms themselves.

SCRAM credentials are held salted (salt, iterations, stored key, server key: RFC 5802), never as
passwords. They come from the metadata store (scram_store.py: AlterUserScramCredentials, KIP-554)
and from an optional static file (`flotilla.sasl.scram.credentials.file`) whose lines use the
syntax of Kafka's `kafka-storage format --add-scram`, so one line serves both brokers:

    SCRAM-SHA-512=[name=alice,password=alice-secret]
    SCRAM-SHA-256=[name=bob,iterations=8192,salt="c2FsdA==",saltedpassword="..."]

The password form is salted at load time with a random salt (4096 iterations unless given). A
credential in the metadata store wins over the file's for the same user and mechanism.

PLAIN users are static per listener, from the PlainLoginModule's `user_<name>` options.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass
from pathlib import Path

import scramp

SCRAM_MECHANISMS = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
DEFAULT_ITERATIONS = 4096  # Kafka's default, and the least it accepts
_LINE = re.compile(r"\s*(SCRAM-SHA-256|SCRAM-SHA-512)\s*=\s*\[(.*)\]\s*$")
_ATTR = re.compile(r'\s*(\w+)\s*=\s*(?:"([^"]*)"|([^,\]]*))\s*(?:,|$)')


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def scram_credential(mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                     salt: bytes | None = None) -> ScramCredential:
    """Salt and hash a password for one SCRAM mechanism (RFC 5802's SaltedPassword, StoredKey, ServerKey)."""
    salt_, stored, server, i = scramp.ScramMechanism(mechanism).make_auth_info(password, iterations, salt)
    return ScramCredential(salt_, stored, server, i)


def from_salted_password(mechanism: str, salted_password: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """A credential given as Kafka's `saltedpassword` (Hi(password, salt, i)) instead of a password."""
    h = SCRAM_MECHANISMS[mechanism]
    client_key = hmac.new(salted_password, b"Client Key", h).digest()
    server_key = hmac.new(salted_password, b"Server Key", h).digest()
    return ScramCredential(salt, h(client_key).digest(), server_key, iterations)


def parse_scram_line(line: str) -> tuple[str, str, ScramCredential]:
    """(mechanism, user, credential) from one `--add-scram` style line; ValueError names what is wrong."""
    m = _LINE.fullmatch(line)
    if m is None:
        raise ValueError("expected SCRAM-SHA-256=[name=...,password=...] or SCRAM-SHA-512=[...]")
    mechanism, attrs, pos = m.group(1), {}, 0
    body = m.group(2)
    while pos < len(body):
        a = _ATTR.match(body, pos)
        if a is None or a.end() == pos:
            raise ValueError(f"cannot parse {body[pos:]!r} (expected key=value pairs)")
        attrs[a.group(1)] = a.group(2) if a.group(2) is not None else a.group(3).strip()
        pos = a.end()
    unknown = set(attrs) - {"name", "password", "iterations", "salt", "saltedpassword"}
    if unknown:
        raise ValueError(f"unknown attribute {sorted(unknown)[0]!r}")
    name = attrs.get("name")
    if not name:
        raise ValueError("no name=")
    iterations = int(attrs.get("iterations", DEFAULT_ITERATIONS))
    if not DEFAULT_ITERATIONS <= iterations <= 16384:
        raise ValueError(f"iterations {iterations} is outside 4096..16384 (Kafka's bounds)")
    if "salt" in attrs and len(base64.b64decode(attrs["salt"])) < 12:
        raise ValueError("the salt must be at least 12 bytes long (scramp's minimum)")
    if "password" in attrs:
        if "saltedpassword" in attrs:
            raise ValueError("give password or saltedpassword, not both")
        salt = base64.b64decode(attrs["salt"]) if "salt" in attrs else None
        return mechanism, name, scram_credential(mechanism, attrs["password"], iterations, salt)
    if "saltedpassword" in attrs and "salt" in attrs:
        return mechanism, name, from_salted_password(
            mechanism, base64.b64decode(attrs["saltedpassword"]), base64.b64decode(attrs["salt"]), iterations)
    raise ValueError("needs password=, or salt= and saltedpassword=")


class ScramCredentials:
    """Broker-wide SCRAM credentials by (mechanism, user), as Kafka's CredentialCache: the static
    file's `entries`, under those of the metadata store (`stored`, a ScramCredentialStore) once
    `use_store` gave it."""

    def __init__(self, entries: dict[tuple[str, str], ScramCredential] | None = None) -> None:
        self._entries = dict(entries or {})
        self._stored = None

    def use_store(self, store) -> None:
        self._stored = store

    @property
    def static(self) -> dict[tuple[str, str], ScramCredential]:
        """The file's credentials by (mechanism, user)."""
        return dict(self._entries)

    @classmethod
    def from_file(cls, path: str | Path) -> "ScramCredentials":
        entries = {}
        for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            try:
                mechanism, user, credential = parse_scram_line(line)
            except ValueError as e:
                raise ValueError(f"{path} line {lineno}: {e}") from None
            entries[(mechanism, user)] = credential
        return cls(entries)

    def lookup(self, mechanism: str, user: str) -> ScramCredential | None:
        if self._stored is not None:
            credential = self._stored.credentials.get((user, mechanism))
            if credential is not None:
                return credential
        return self._entries.get((mechanism, user))

    def __len__(self) -> int:
        return len(self._entries)


class PlainUsers:
    """Static PLAIN users of one listener (the PlainLoginModule's `user_<name>` options)."""

    def __init__(self, passwords: dict[str, str]) -> None:
        self._passwords = {u: p.encode() for u, p in passwords.items()}

    def check(self, user: str, password: str) -> bool:
        expected = self._passwords.get(user)
        # compare_digest even for unknown users, so timing tells nothing about who exists
        return hmac.compare_digest(expected if expected is not None else b"\0" * 32, password.encode()) and \
            expected is not None

    def __len__(self) -> int:
        return len(self._passwords)
