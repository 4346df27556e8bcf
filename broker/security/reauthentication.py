"""Re-authentication of SASL connections (KIP-368, with `connections.max.reauth.ms`), as Kafka's
KafkaChannel and SocketServer do it.

A SASL authentication that completes with `connections.max.reauth.ms` > 0 starts a session of that
length: SaslAuthenticate tells the client (session_lifetime_ms), and the connection holds a
`SaslSession`. Before each request the connection asks `SaslSession.check`:

- a SaslHandshake begins re-authentication (a fresh authenticator takes the connection's frames
  until it completes), unless the last one began less than a second ago: then it is served as
  any SaslHandshake on an authenticated connection (ILLEGAL_SASL_STATE);
- any other request after the session ended closes the connection without an answer (Kafka
  checks when a request arrives, not with a timer: an idle connection is left to
  `connections.max.idle.ms`).

Re-authentication must use the same mechanism and end as the same principal, else it fails as a
failed authentication does (SASL_AUTHENTICATION_FAILED, then the connection closes). Its success
starts a new session.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.security.principal import KafkaPrincipal

if TYPE_CHECKING:
    from broker.security.listeners import ListenerSecurity

SASL_HANDSHAKE = 17
MIN_REAUTH_INTERVAL_S = 1.0  # Kafka's MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
_API_KEY = struct.Struct(">h")


class SessionExpired(Exception):
    """The connection's SASL session ended and the client did not re-authenticate: close it."""


@dataclass
class SaslSession:
    security: "ListenerSecurity"
    mechanism: str
    principal: KafkaPrincipal
    expires_at: float  # event-loop time
    reauth_started_at: float | None = None  # when the re-authentication that made it began

    def check(self, frame: bytes, now: float) -> bool:
        """Before a request arriving at loop time `now`: True when it begins re-authentication (a
        fresh authenticator takes it, authenticator.reauthenticator), False to serve it as usual,
        or SessionExpired."""
        api_key = _API_KEY.unpack_from(frame)[0] if len(frame) >= 2 else -1
        if api_key == SASL_HANDSHAKE and (
                self.reauth_started_at is None or now - self.reauth_started_at >= MIN_REAUTH_INTERVAL_S):
            return True
        if now > self.expires_at:
            raise SessionExpired(f"its SASL session (User:{self.principal.name}, {self.mechanism}) ended "
                                 f"{now - self.expires_at:.1f}s ago without re-authentication "
                                 f"(connections.max.reauth.ms)")
        return False


def reauthentication_refusal(session: SaslSession, mechanism: str, principal: KafkaPrincipal | None) -> str | None:
    """Why a re-authentication may not complete as `principal` with `mechanism` (Kafka's words), or None."""
    if mechanism != session.mechanism:
        return (f"SASL mechanism '{mechanism}' requested by client is not supported for re-authentication "
                f"of mechanism '{session.mechanism}'")
    if principal is not None and principal != session.principal:
        return (f"Cannot change principals during re-authentication from {session.principal.type}."
                f"{session.principal.name}: {principal.type}.{principal.name}")
    return None
