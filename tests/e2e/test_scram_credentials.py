"""SCRAM credentials managed through the Kafka API (KIP-554): confluent-kafka's AdminClient and
Kafka 4.1's own kafka-configs tool add, list and delete users' credentials; a SASL client
authenticates with a new user and is refused once the credential is deleted; Kafka's errors for
bad requests. The broker is tests/support/secure_broker.py's (alice and bob given at start-up), the
same against Apache Kafka 4.1 (`--kafka-target=apache`). New users are new per test, so the module
runs in any order.
"""

from __future__ import annotations

import pytest
from kio.schema.alter_user_scram_credentials.v0 import request as alter
from kio.schema.describe_user_scram_credentials.v0 import request as describe
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i32

from tests.e2e.test_quotas import kafka_configs
from flotilla.testenv import kafka_wire
from tests.support.interop_suite import make_topic
from tests.support.secure_broker import SecureBroker, running_secure_broker
from tests.support.secure_clients import confluent_produce as _confluent_produce
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.timeout(180)

SHA256, SHA512 = 1, 2


@pytest.fixture(scope="module")
def secure(kafka_target, tmp_path_factory) -> SecureBroker:
    with running_secure_broker(kafka_target, tmp_path_factory.mktemp("scram")) as sb:
        yield sb


def _admin(secure: SecureBroker):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": secure.broker.bootstrap})


def _can_produce(secure: SecureBroker, listener: str, user: str, password: str, topic: str) -> bool:
    """Whether `user` authenticates with `password` and writes one record (a refusal raises)."""
    _confluent_produce(secure.confluent(listener, user=user, password=password) | {"message.timeout.ms": 8000},
                       topic, [f"from-{user}".encode()])
    return True


def auth_error(conf: dict) -> str:
    """The authentication error librdkafka reports for `conf`, or "" when it authenticated (a wait
    may then ask again: a credential change reaches a broker's cache a moment after the answer)."""
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=3)
        return ""
    except Exception:
        admin.poll(1)  # error_cb runs from poll()
    return " ".join(e.str() for e in errors if e.code() == KafkaError._AUTHENTICATION) or f"no auth error: {errors}"


def _refused(secure: SecureBroker, listener: str, user: str, password: str) -> str:
    return auth_error(secure.confluent(listener, user=user, password=password))


def test_confluent_admin_client_adds_lists_and_deletes_a_user(secure):
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                       UserScramCredentialUpsertion)

    admin, topic = _admin(secure), make_topic(secure.broker, 1, "scram-carol")
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192)
    futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-secret")])
    futures["carol"].result(30)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == \
        [(ScramMechanism.SCRAM_SHA_512, 8192)]
    everyone = admin.describe_user_scram_credentials().result(30)
    assert {"alice", "bob", "carol"} <= set(everyone), sorted(everyone)
    wait_for("carol to produce over SASL_SSL/SCRAM-SHA-512",
             lambda: _can_produce(secure, "SASL_SSL", "carol", "carol-secret", topic), timeout=30)
    assert "invalid credentials" in _refused(secure, "SASL_SSL", "carol", "not-carols")

    deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion("carol", ScramMechanism.SCRAM_SHA_512)])
    deleted["carol"].result(30)
    with pytest.raises(KafkaException) as gone:
        admin.describe_user_scram_credentials(["carol"])["carol"].result(30)
    assert gone.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND, gone.value
    wait_for("carol's deleted credential to be refused",
             lambda: _refused(secure, "SASL_PLAINTEXT", "carol", "carol-secret"),
             until=lambda message: "invalid credentials with SASL mechanism SCRAM-SHA-512" in message, timeout=30)


def test_kafka_configs_tool_adds_describes_and_deletes_a_user(secure):
    """kafka-configs.sh --entity-type users (Kafka 4.1's ConfigCommand, the Java AdminClient)."""
    from tests.e2e.test_security import _kafka_python_read

    topic = make_topic(secure.broker, 1, "scram-dave")
    b = secure.broker.bootstrap
    # Two mechanisms of one user in one command are one user altered twice in one request: Kafka
    # refuses that (DUPLICATE_RESOURCE), so one command per mechanism.
    with pytest.raises(AssertionError, match="DuplicateResourceException"):
        kafka_configs(b, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=4096,password=dave-secret],"
                      "SCRAM-SHA-256=[password=dave-256]", "--entity-type", "users", "--entity-name", "dave")
    kafka_configs(b, "--alter", "--add-config", "SCRAM-SHA-512=[iterations=4096,password=dave-secret]",
                  "--entity-type", "users", "--entity-name", "dave")
    kafka_configs(b, "--alter", "--add-config", "SCRAM-SHA-256=[password=dave-256]",
                  "--entity-type", "users", "--entity-name", "dave")
    out = kafka_configs(b, "--describe", "--entity-type", "users", "--entity-name", "dave")
    assert "SCRAM-SHA-512=iterations=4096" in out and "SCRAM-SHA-256=iterations=4096" in out, out
    assert "dave-secret" not in out
    wait_for("dave to produce over SASL_PLAINTEXT/SCRAM-SHA-512",
             lambda: _can_produce(secure, "SASL_PLAINTEXT", "dave", "dave-secret", topic), timeout=30)
    kw = secure.kafka_python("SASL_SSL", user="dave", password="dave-secret")
    assert _kafka_python_read(kw, topic, 1) == [b"from-dave"]

    kafka_configs(b, "--alter", "--delete-config", "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "dave")
    out = kafka_configs(b, "--describe", "--entity-type", "users", "--entity-name", "dave")
    assert "SCRAM-SHA-512" not in out and "SCRAM-SHA-256=iterations=4096" in out, out
    wait_for("dave's deleted SCRAM-SHA-512 credential to be refused",
             lambda: _refused(secure, "SASL_SSL", "dave", "dave-secret"),
             until=lambda message: "invalid credentials" in message, timeout=30)


def _alter(secure: SecureBroker, deletions=(), upsertions=()) -> dict[str, tuple[ErrorCode, str | None]]:
    with kafka_wire.connect(secure.broker.bootstrap) as conn:
        answer = conn.request(alter.AlterUserScramCredentialsRequest(
            deletions=tuple(alter.ScramCredentialDeletion(name=n, mechanism=i8(m)) for n, m in deletions),
            upsertions=tuple(alter.ScramCredentialUpsertion(name=n, mechanism=i8(m), iterations=i32(i),
                                                            salt=b"s" * 32, salted_password=b"p" * 64)
                             for n, m, i in upsertions)))
    out = {r.user: (r.error_code, r.error_message) for r in answer.results}
    assert len(out) == len(answer.results), answer
    return out


def test_kafkas_errors_over_the_wire(secure):
    assert _alter(secure, upsertions=[("erin", SHA512, 4095), ("frank", SHA512, 16385), ("gina", 3, 4096),
                                      ("", SHA256, 4096)]) == {
        "erin": (ErrorCode.unacceptable_credential, "Too few iterations"),
        "frank": (ErrorCode.unacceptable_credential, "Too many iterations"),
        "gina": (ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism"),
        "": (ErrorCode.unacceptable_credential, "Username must not be empty")}
    assert _alter(secure, deletions=[("nobody", SHA512)], upsertions=[("hank", SHA512, 16384), ("hank", SHA256, 4096)]) == {
        "nobody": (ErrorCode.resource_not_found, "Attempt to delete a user credential that does not exist"),
        "hank": (ErrorCode.duplicate_resource, "A user credential cannot be altered twice in the same request")}
    with kafka_wire.connect(secure.broker.bootstrap) as conn:
        answer = conn.request(describe.DescribeUserScramCredentialsRequest(users=tuple(
            describe.UserName(name=n) for n in ("alice", "hank", "alice"))))
    assert answer.error_code == ErrorCode.none
    assert {r.user: (r.error_code, r.error_message, len(r.credential_infos)) for r in answer.results} == {
        "alice": (ErrorCode.duplicate_resource,
                  "Cannot describe SCRAM credentials for the same user twice in a single request: alice", 0),
        "hank": (ErrorCode.resource_not_found, "Attempt to describe a user credential that does not exist: hank", 0)}


@pytest.mark.parametrize("alias", ["\uff42\uff4f\uff42", "bo\u00adb", "bob\u200b"])
def test_a_name_that_folds_into_another_users_is_refused(secure, alias):
    """Issue 38: bob's own password under a name whose SASLprep form is `bob` (full-width
    letters, a soft hyphen, a zero-width space) must not log in, let alone as another principal
    than bob's: Kafka's SCRAM grammar admits ASCII names only and looks up the name as sent."""
    assert auth_error(secure.confluent("SASL_PLAINTEXT", user="bob", password="bob-secret")) == ""
    refused = auth_error(secure.confluent("SASL_PLAINTEXT", user=alias, password="bob-secret"))
    assert refused and "no auth error" not in refused, refused
