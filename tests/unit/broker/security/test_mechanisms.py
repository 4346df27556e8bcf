"""PLAIN and SCRAM server sides: Kafka's messages, and SCRAM checked against RFC 7677's example."""

import base64

import pytest
import scramp

from broker.security.credentials import (PlainUsers, ScramCredentials, from_salted_password, parse_scram_line,
                                         scram_credential)
from broker.security.mechanisms import PlainServer, SaslFailure, ScramServer

# RFC 7677 section 3: user "user", password "pencil".
RFC7677 = {
    "salt": "W22ZaJ0SNY7soEsUEjb6gQ==",
    "client_first": "n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
    "server_nonce": "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    "server_first": "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
    "client_final": "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                    "p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    "server_final": "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
}


def _rfc_server() -> ScramServer:
    cred = scram_credential("SCRAM-SHA-256", "pencil", 4096, base64.b64decode(RFC7677["salt"]))
    return ScramServer("SCRAM-SHA-256", ScramCredentials({("SCRAM-SHA-256", "user"): cred}),
                       s_nonce=RFC7677["server_nonce"])


def test_scram_sha_256_rfc7677_exchange():
    server = _rfc_server()
    assert server.evaluate(RFC7677["client_first"].encode()).decode() == RFC7677["server_first"]
    assert not server.complete
    assert server.evaluate(RFC7677["client_final"].encode()).decode() == RFC7677["server_final"]
    assert server.complete and server.username == "user"


def test_scram_wrong_proof_is_refused_without_telling_why():
    server = _rfc_server()
    server.evaluate(RFC7677["client_first"].encode())
    bad = RFC7677["client_final"].replace("p=dHzb", "p=AHzb")
    with pytest.raises(SaslFailure) as e:
        server.evaluate(bad.encode())
    assert e.value.client_message is None  # the authenticator sends Kafka's generic text
    assert not server.complete


def test_scram_unknown_user_fails_at_the_first_message():
    server = _rfc_server()
    with pytest.raises(SaslFailure, match="unknown user 'nobody'"):
        server.evaluate(b"n,,n=nobody,r=abc")


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_with_scramp_client_and_escaped_names(mechanism):
    cred = scram_credential(mechanism, "s3cret")
    server = ScramServer(mechanism, ScramCredentials({(mechanism, "a,b=c"): cred}))
    client = scramp.ScramClient([mechanism], "a,b=c", "s3cret")
    server_first = server.evaluate(client.get_client_first().encode())
    client.set_server_first(server_first.decode())
    final = server.evaluate(client.get_client_final().encode())
    client.set_server_final(final.decode())  # raises unless the server proved it knows the key
    assert server.username == "a,b=c"


def test_salted_password_line_equals_password_line():
    salt = b"0123456789abcdef"
    mech, name, by_password = parse_scram_line(
        f'SCRAM-SHA-512=[name=alice,password=alice-secret,salt="{base64.b64encode(salt).decode()}",iterations=8192]')
    salted = scramp.core.hi(scramp.core.MECHS[mech].hf, b"alice-secret", salt, 8192)
    assert (mech, name) == ("SCRAM-SHA-512", "alice")
    assert from_salted_password(mech, salted, salt, 8192) == by_password


@pytest.mark.parametrize("line,error", [
    ("SCRAM-SHA-1=[name=a,password=b]", "expected"),
    ("SCRAM-SHA-256=[password=b]", "no name"),
    ("SCRAM-SHA-256=[name=a]", "needs password"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=100]", "outside 4096..16384"),
    ("SCRAM-SHA-256=[name=a,pasword=b]", "unknown attribute"),
])
def test_bad_scram_lines(line, error):
    with pytest.raises(ValueError, match=error):
        parse_scram_line(line)


def test_credentials_file_names_the_bad_line(tmp_path):
    f = tmp_path / "scram"
    f.write_text("# users\nSCRAM-SHA-256=[name=a,password=b]\n\nSCRAM-SHA-256=[name=c]\n")
    with pytest.raises(ValueError, match="line 4"):
        ScramCredentials.from_file(f)


def test_plain_accepts_the_right_password_only():
    users = PlainUsers({"alice": "alice-secret"})
    ok = PlainServer(users)
    assert ok.evaluate(b"\0alice\0alice-secret") == b"" and ok.complete and ok.username == "alice"
    assert PlainServer(users).evaluate(b"alice\0alice\0alice-secret") == b""  # authzid = username is fine


@pytest.mark.parametrize("token,message", [
    (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
    (b"\0bob\0alice-secret", "Authentication failed: Invalid username or password"),
    (b"\0alice", "Invalid SASL/PLAIN response: expected 3 tokens, got 2"),
    (b"\0\0pw", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"bob\0alice\0alice-secret", "Authentication failed: Client requested an authorization id that is different from username"),
])
def test_plain_refusals_in_kafkas_words(token, message):
    server = PlainServer(PlainUsers({"alice": "alice-secret"}))
    with pytest.raises(SaslFailure) as e:
        server.evaluate(token)
    assert e.value.client_message == message
    assert not server.complete and server.username is None


@pytest.mark.parametrize("alias", ["\uff42\uff4f\uff42", "bo\u00adb", "bob\u200b", "BOB"])
def test_scram_does_not_fold_one_name_into_another(alias):
    """Issue 38: scramp looks a user up under the SASLprep form of the name (full-width letters
    folded, soft hyphens and zero-width spaces dropped); the name as sent (librdkafka and Kafka's
    client send it so; scramp's own client would SASLprep it first) must be the one looked up, and
    a name Kafka's grammar refuses (non-ASCII) finds nothing."""
    cred = scram_credential("SCRAM-SHA-512", "bob-secret")
    server = ScramServer("SCRAM-SHA-512", ScramCredentials({("SCRAM-SHA-512", "bob"): cred}))
    with pytest.raises(SaslFailure, match="unknown user"):
        server.evaluate(f"n,,n={alias},r=abc".encode())
    assert not server.complete and server.username is None


def test_scram_two_users_whose_names_fold_together_each_log_in_as_themselves():
    wide = "\uff45\uff56\uff45"
    creds = ScramCredentials({("SCRAM-SHA-512", "eve"): scram_credential("SCRAM-SHA-512", "eve-secret"),
                              ("SCRAM-SHA-512", wide): scram_credential("SCRAM-SHA-512", "wide-secret")})
    server = ScramServer("SCRAM-SHA-512", creds)
    with pytest.raises(SaslFailure, match="unknown user"):  # eve sending the full-width name
        server.evaluate(f"n,,n={wide},r=abc".encode())
    server = ScramServer("SCRAM-SHA-512", creds)
    client = scramp.ScramClient(["SCRAM-SHA-512"], "eve", "eve-secret")
    client.set_server_first(server.evaluate(client.get_client_first().encode()).decode())
    server.evaluate(client.get_client_final().encode())
    assert server.complete and server.username == "eve"


def test_failed_logins_log_a_bounded_share_of_the_name():
    """A 500 KiB user name must not make a 500 KiB log line (issue 38)."""
    huge = "x" * 512_000
    with pytest.raises(SaslFailure) as plain:
        PlainServer(PlainUsers({"alice": "alice-secret"})).evaluate(f"\0{huge}\0pw".encode())
    server = ScramServer("SCRAM-SHA-512", ScramCredentials({}))
    with pytest.raises(SaslFailure) as scram:
        server.evaluate(f"n,,n={huge},r=abc".encode())
    for failure in (plain.value, scram.value):
        assert len(str(failure)) < 200 and "512,000 characters" in str(failure), str(failure)[:300]
