"""KIP-554's decisions (broker/security/scram_admin.py) and the credential store's file backend:
Kafka's errors and messages, one answer per user, and what SCRAM then authenticates with."""

from __future__ import annotations

import asyncio
import hashlib
import json
from types import SimpleNamespace as NS

import pytest
import scramp
from kio.schema.errors import ErrorCode

from broker.security import scram_admin
from broker.security.credentials import ScramCredentials, scram_credential
from broker.security.mechanisms import ScramServer
from broker.security.scram_store import FileScramCredentialStore

SHA256, SHA512 = 1, 2


def upsert(name, mechanism=SHA512, iterations=4096, password="pw", salt=b"salty-salt-12"):
    h = hashlib.sha512 if mechanism == SHA512 else hashlib.sha256
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), salt, iterations) if mechanism in (1, 2) else b"x"
    return NS(name=name, mechanism=mechanism, iterations=iterations, salt=salt, salted_password=salted)


def delete(name, mechanism=SHA512):
    return NS(name=name, mechanism=mechanism)


def outcome(results):
    return [(r.user, r.error, r.message) for r in results]


def test_upsertions_are_checked_as_kafkas_controller_does():
    changes, results = scram_admin.plan_alter({}, [], [
        upsert("alice"), upsert("low", iterations=4095), upsert("high", iterations=16385), upsert("", SHA256),
        upsert("odd", mechanism=0), upsert("twice"), upsert("twice", SHA256), upsert("edge", iterations=16384),
        upsert("short", salt=b"eleven-byte")])
    assert outcome(results) == [
        ("alice", ErrorCode.none, None), ("edge", ErrorCode.none, None),
        ("low", ErrorCode.unacceptable_credential, "Too few iterations"),
        ("high", ErrorCode.unacceptable_credential, "Too many iterations"),
        ("", ErrorCode.unacceptable_credential, "Username must not be empty"),
        ("odd", ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        ("twice", ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request"),
        ("short", ErrorCode.unacceptable_credential, "The salt must be at least 12 bytes long")]
    assert set(changes) == {("alice", "SCRAM-SHA-512"), ("edge", "SCRAM-SHA-512")}
    assert changes[("edge", "SCRAM-SHA-512")].iterations == 16384


def test_deletions_need_a_stored_credential_and_a_user_appears_once():
    stored = {("alice", "SCRAM-SHA-512"): scram_credential("SCRAM-SHA-512", "a"),
              ("bob", "SCRAM-SHA-256"): scram_credential("SCRAM-SHA-256", "b")}
    changes, results = scram_admin.plan_alter(stored, [delete("alice"), delete("bob"), delete("carol")],
                                              [upsert("bob"), upsert("dave")])
    assert outcome(results) == [
        ("alice", ErrorCode.none, None), ("dave", ErrorCode.none, None),
        ("bob", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        ("carol", ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist")]
    assert changes == {("alice", "SCRAM-SHA-512"): None, ("dave", "SCRAM-SHA-512"): changes[("dave", "SCRAM-SHA-512")]}
    # a deletion and an upsertion of one user in one request: neither applies
    changes, results = scram_admin.plan_alter(stored, [delete("alice")], [upsert("alice", SHA256)])
    assert changes == {} and outcome(results) == [("alice", ErrorCode.duplicate_resource, scram_admin.ALTER_DUPLICATE)]


def test_describe_lists_mechanisms_and_iterations_never_keys():
    known = {("alice", "SCRAM-SHA-512"): scram_credential("SCRAM-SHA-512", "a", 8192),
             ("alice", "SCRAM-SHA-256"): scram_credential("SCRAM-SHA-256", "a"),
             ("bob", "SCRAM-SHA-256"): scram_credential("SCRAM-SHA-256", "b")}
    assert [(r.user, r.error, r.credentials) for r in scram_admin.describe(known, None)] == [
        ("alice", ErrorCode.none, ((SHA256, 4096), (SHA512, 8192))), ("bob", ErrorCode.none, ((SHA256, 4096),))]
    assert scram_admin.describe(known, []) == scram_admin.describe(known, None)
    got = scram_admin.describe(known, ["bob", "zed", "bob"])
    assert outcome(got) == [
        ("bob", ErrorCode.duplicate_resource,
         "Cannot describe SCRAM credentials for the same user twice in a single request: bob"),
        ("zed", ErrorCode.resource_not_found, "Attempt to describe a user credential that does not exist: zed")]


def _authenticates(credentials: ScramCredentials, user: str, password: str, mechanism="SCRAM-SHA-512") -> bool:
    server = ScramServer(mechanism, credentials)
    client = scramp.ScramClient([mechanism], user, password)
    try:
        client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
        client.set_server_final(server.evaluate(client.get_client_final().encode()).decode())
    except Exception:
        return False
    return server.complete and server.username == user


def test_file_store_keeps_keys_not_passwords_and_wins_over_the_static_file(tmp_path):
    static = ScramCredentials({("SCRAM-SHA-512", "alice"): scram_credential("SCRAM-SHA-512", "from-file")})
    store = FileScramCredentialStore(tmp_path)
    static.use_store(store)
    assert _authenticates(static, "alice", "from-file")
    changes, _ = scram_admin.plan_alter({}, [], [upsert("alice", password="from-api"), upsert("carol", password="c")])
    asyncio.run(store.alter(changes))
    assert _authenticates(static, "alice", "from-api") and not _authenticates(static, "alice", "from-file")
    assert _authenticates(static, "carol", "c")
    text = (tmp_path / "flotilla-scram-credentials.json").read_text()
    assert "from-api" not in text and (tmp_path / "flotilla-scram-credentials.json").stat().st_mode & 0o077 == 0
    assert {c["user"] for c in json.loads(text)["credentials"]} == {"alice", "carol"}
    # a broker restarted on the same directory reads them back; a deletion brings the file's back
    again = FileScramCredentialStore(tmp_path)
    assert dict(again.credentials) == dict(store.credentials)
    asyncio.run(again.alter({("alice", "SCRAM-SHA-512"): None, ("carol", "SCRAM-SHA-512"): None}))
    static.use_store(again)
    assert _authenticates(static, "alice", "from-file") and not _authenticates(static, "carol", "c")
    assert [r.user for r in scram_admin.describe(scram_admin.effective(static, again), None)] == ["alice"]


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_a_credential_from_a_salted_password_authenticates(mechanism):
    name = {SHA256: "SCRAM-SHA-256", SHA512: "SCRAM-SHA-512"}[mechanism]
    changes, _ = scram_admin.plan_alter({}, [], [upsert("erin", mechanism, 4096, "erin-pw", b"0123456789ab")])
    creds = ScramCredentials()
    creds.use_store(NS(credentials=changes))
    assert _authenticates(creds, "erin", "erin-pw", name)
    assert not _authenticates(creds, "erin", "wrong", name)
