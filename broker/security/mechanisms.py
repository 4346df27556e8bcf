"""The server side of each SASL mechanism: one object per authentication, fed the client's tokens.

`evaluate(token)` returns the next server token (b"" when there is none) until `complete`; a refusal
raises `SaslFailure`. As Kafka's SASL servers: PLAIN failures tell the client why in Kafka's words
(a SaslAuthenticationException's message); SCRAM failures tell it only the generic "invalid
credentials" text the authenticator adds (Kafka's SaslException path), never whether the user exists.
The SCRAM arithmetic (RFC 5802/7677) is scramp's.
"""

from __future__ import annotations

import scramp

from broker.security.credentials import SCRAM_MECHANISMS, PlainUsers, ScramCredentials

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


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
            raise SaslFailure(f"invalid username or password for user {username!r}",
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
        self._server = scramp.ScramMechanism(mechanism).make_server(self._auth_info, s_nonce=s_nonce)
        self._step = 0

    def _auth_info(self, username: str):
        credential = self.credentials.lookup(self.mechanism, username)
        if credential is None:
            self._unknown = username
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
                raise SaslFailure(f"unknown user {self._unknown!r}") from None
            who = getattr(self._server, "client_first_bare", "")
            raise SaslFailure(f"{e} ({who.split(',r=')[0] or 'no client-first message'})") from None
        raise SaslFailure("SCRAM authentication already complete")

    def _user_from(self, _client_final: str) -> str:
        bare = self._server.client_first_bare
        name = next(p[2:] for p in bare.split(",") if p.startswith("n="))
        return name.replace("=2C", ",").replace("=3D", "=")


def server_for(mechanism: str, plain_users: PlainUsers, scram: ScramCredentials) -> SaslServer:
    if mechanism == "PLAIN":
        return PlainServer(plain_users)
    return ScramServer(mechanism, scram)
