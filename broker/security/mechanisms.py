"""The server side of each SASL mechanism: one object per authentication, fed the client's tokens.

`evaluate(token)` returns the next server token (b"" when there is none) until `complete`; a refusal
raises `SaslFailure`. As Kafka's SASL servers: PLAIN failures tell the client why in Kafka's words
(a SaslAuthenticationException's message); SCRAM failures tell it only the generic "invalid
credentials" text the authenticator adds (Kafka's SaslException path), never whether the user exists.
The SCRAM arithmetic (RFC 5802/7677) is scramp's; the user name is ours: one string, taken from
the client-first message as sent, is both the credential looked up and the principal (scramp would
look up its SASLprep form, which folds `ｂｏｂ` and `bo\u00adb` into `bob`). As Kafka's SCRAM
message grammar, a name is ASCII without `,` and `=` (those escaped as `=2C` and `=3D`); any other
name is refused as an unknown user would be. Log lines quote client input bounded (`quoted`).
"""

from __future__ import annotations

import re

import scramp

from broker.security.credentials import SCRAM_MECHANISMS, PlainUsers, ScramCredentials

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
QUOTE_LIMIT = 64  # characters of a client-chosen string that a log line repeats
# Kafka's ScramMessages: saslname = 1*(value-safe-char / "=2C" / "=3D"), ASCII only.
_SASLNAME = re.compile(r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+")


def quoted(text: str, limit: int = QUOTE_LIMIT) -> str:
    """`text` as a log line may repeat it: repr'd and cut to `limit` characters (a client can
    send megabytes as a user name; the log must not grow with them)."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r}... ({len(text):,} characters)"


class SaslFailure(Exception):
    """Authentication refused. `client_message` is what the client is told (None: Kafka's generic
    invalid-credentials message); str(self) is the reason the broker logs."""

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.client_message = client_message


class SaslServer:
    mechanism: str
    complete = False
    username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        raise NotImplementedError


class PlainServer(SaslServer):
    """RFC 4616: one token `authzid NUL authcid NUL password`, checked as Kafka's PlainSaslServer."""

    mechanism = "PLAIN"

    def __init__(self, users: PlainUsers) -> None:
        self.users = users

    def evaluate(self, token: bytes) -> bytes:
        def refuse(message: str) -> SaslFailure:
            return SaslFailure(message, message)

        if self.complete:
            raise refuse("PLAIN authentication already complete")
        try:
            parts = token.decode("utf-8").split("\0")
        except UnicodeDecodeError:
            raise refuse("Invalid SASL/PLAIN response: not UTF-8") from None
        if len(parts) != 3:
            raise refuse(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise refuse("Authentication failed: username not specified")
        if not password:
            raise refuse("Authentication failed: password not specified")
        if not self.users.check(username, password):
            raise SaslFailure(f"invalid username or password for user {quoted(username)}",
                              "Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise refuse("Authentication failed: Client requested an authorization id that is different from username")
        self.username = username
        self.complete = True
        return b""


class ScramServer(SaslServer):
    """RFC 5802: client-first -> server-first (salt, iterations, nonce); client-final (proof) ->
    server-final (server signature). Unknown users fail at the first message, as Kafka's."""

    def __init__(self, mechanism: str, credentials: ScramCredentials, s_nonce: str | None = None) -> None:
        """`s_nonce`: the server's nonce, random unless a test fixes it (RFC 7677's example)."""
        self.mechanism = mechanism
        self.credentials = credentials
        self._unknown: str | None = None
        self._name: str | None = None
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info, s_nonce=s_nonce)
        self._step = 0

    def _auth_info(self, _saslprepped: str):
        """scramp asks with its SASLprep form of the name; we look up the name as sent, the one
        the principal is built from."""
        name = self._name
        credential = self.credentials.lookup(self.mechanism, name) if name is not None else None
        if credential is None:
            self._unknown = name if name is not None else _saslprepped
            return None
        return credential.salt, credential.stored_key, credential.server_key, credential.iterations

    def evaluate(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslFailure("SCRAM message is not UTF-8") from None
        try:
            if self._step == 0:
                self._step = 1
                self._name = _name_in(message)
                self._server.set_client_first(message)
                return self._server.get_server_first().encode()
            if self._step == 1:
                self._step = 2
                self._server.set_client_final(message)
                final = self._server.get_server_final()
                self.username = self._user_from(message)
                self.complete = True
                return final.encode()
        except scramp.ScramException as e:
            if self._unknown is not None:
                raise SaslFailure(f"unknown user {quoted(self._unknown)}") from None
            who = getattr(self._server, "client_first_bare", "")
            raise SaslFailure(f"{e} ({quoted(who.split(',r=')[0]) if who else 'no client-first message'})") from None
        raise SaslFailure("SCRAM authentication already complete")

    def _user_from(self, _client_final: str) -> str:
        assert self._name is not None  # a name Kafka's grammar refuses finds no credential
        return self._name


def _name_in(client_first: str) -> str | None:
    """The user name of a client-first message (`gs2-header n=name,r=nonce`), `=2C` and `=3D`
    decoded; None when it is missing or not a name Kafka's SCRAM grammar admits."""
    parts = client_first.split(",")
    bare = parts[2:] if len(parts) > 2 else []
    raw = next((p[2:] for p in bare if p.startswith("n=")), None)
    if raw is None or not _SASLNAME.fullmatch(raw):
        return None
    return raw.replace("=2C", ",").replace("=3D", "=")


def server_for(mechanism: str, plain_users: PlainUsers, scram: ScramCredentials) -> SaslServer:
    if mechanism == "PLAIN":
        return PlainServer(plain_users)
    return ScramServer(mechanism, scram)
