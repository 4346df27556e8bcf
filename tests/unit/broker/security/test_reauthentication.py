"""KIP-368 decisions (broker/security/reauthentication.py): when a SaslHandshake re-authenticates,
when a request ends an expired connection, and Kafka's words for a changed mechanism or principal."""

from __future__ import annotations

import asyncio
import struct
import pytest

from broker.security.authenticator import reauthenticator
from broker.security.listeners import ListenerSecurity
from broker.security.principal import user
from broker.security.reauthentication import SaslSession, SessionExpired, reauthentication_refusal

HANDSHAKE = struct.pack(">h", 17) + b"\0" * 6
METADATA = struct.pack(">h", 3) + b"\0" * 6


def _session(expires_in: float, reauth_ago: float | None = None) -> SaslSession:
    now = asyncio.get_running_loop().time()
    return SaslSession(ListenerSecurity("SASL_PLAINTEXT", "SASL_PLAINTEXT"), "PLAIN", user("bob"), now + expires_in,
                       None if reauth_ago is None else now - reauth_ago)


def test_when_requests_pass_reauthenticate_or_close():
    async def scenario():
        now = asyncio.get_running_loop().time()
        assert _session(5).check(METADATA, now) is False
        with pytest.raises(SessionExpired, match="User:bob, PLAIN"):
            _session(-0.1).check(METADATA, now)
        assert _session(-0.1).check(HANDSHAKE, now) is True  # even after the end: re-authentication begins
        assert _session(5, reauth_ago=0.5).check(HANDSHAKE, now) is False  # < 1 s: served as usual
        assert _session(5, reauth_ago=1.5).check(HANDSHAKE, now) is True

    asyncio.run(scenario())


def test_a_handshake_hands_the_connection_to_a_reauthenticator():
    async def scenario():
        session = _session(-0.1)
        started = reauthenticator(session, HANDSHAKE, metrics=None)
        assert started is not None and started.reauthenticating is session
        assert started.reauthenticating.principal == user("bob")
        assert reauthenticator(_session(5), METADATA, metrics=None) is None
        with pytest.raises(SessionExpired):
            reauthenticator(session, METADATA, metrics=None)

    asyncio.run(scenario())


def test_kafkas_refusals():
    async def scenario():
        s = _session(5)
        assert reauthentication_refusal(s, "PLAIN", user("bob")) is None
        assert reauthentication_refusal(s, "SCRAM-SHA-512", None) == (
            "SASL mechanism 'SCRAM-SHA-512' requested by client is not supported for re-authentication of "
            "mechanism 'PLAIN'")
        assert reauthentication_refusal(s, "PLAIN", user("alice")) == (
            "Cannot change principals during re-authentication from User.bob: User.alice")

    asyncio.run(scenario())
