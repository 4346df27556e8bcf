"""The operator's own SCRAM identity on SASL clusters (clients/credentials.py) and what the
rendered server.properties grants it (builders/configmap.py)."""

from __future__ import annotations

from flotilla_operator.clients import credentials as oc
from flotilla_operator.builders.common import Owner
from flotilla_operator.builders.configmap import server_properties
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec

from broker.security.credentials import scram_credential
from broker.security.scram_store import from_doc, to_doc

OWNER = Owner(name="demo", namespace="ns", uid="u-1")
SASL = [{"name": "SASL_PLAINTEXT", "port": 9092, "protocol": "SASL_PLAINTEXT"}]


def test_the_stored_credential_is_the_brokers_format_and_keeps_other_users():
    bob = scram_credential("SCRAM-SHA-256", "bob-pw")
    doc = oc.with_credential(to_doc({("bob", "SCRAM-SHA-256"): bob}), "flotilla-operator", "pw-1")
    creds = from_doc(doc)  # the brokers' own parser reads it
    assert creds[("bob", "SCRAM-SHA-256")] == bob
    assert oc.credential_matches(doc, "flotilla-operator", "pw-1")
    assert not oc.credential_matches(doc, "flotilla-operator", "pw-2")
    assert not oc.credential_matches(None, "flotilla-operator", "pw-1")
    assert "pw-1" not in str(doc)
    removed = oc.with_credential(doc, "flotilla-operator", None)
    assert set(from_doc(removed)) == {("bob", "SCRAM-SHA-256")}


def test_the_password_secret_is_owned_by_the_cluster_and_random():
    secret = oc.build_credentials_secret(OWNER, "s3cret")
    assert secret["metadata"]["name"] == "demo-operator-credentials"
    assert secret["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    assert oc.password_of(secret) == "s3cret"
    assert oc.new_password() != oc.new_password() and len(oc.new_password()) >= 32


def test_the_bootstrap_listener_decides_the_protocol():
    assert oc.bootstrap_protocol({"spec": {}}) == "PLAINTEXT"
    assert oc.bootstrap_protocol({"spec": {"listeners": SASL}}) == "SASL_PLAINTEXT"


def test_a_sasl_fleet_makes_the_operator_a_super_user_and_offers_scram():
    text = server_properties(OWNER, KafkaClusterSpec.model_validate({"listeners": SASL}))
    assert "super.users=User:flotilla-operator;User:flotilla-broker\n" in text
    assert "sasl.enabled.mechanisms=SCRAM-SHA-512\n" in text
    assert "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT" not in text  # name == protocol
    # the user's super users are kept, once each, with the operator's added
    spec = KafkaClusterSpec.model_validate({"listeners": SASL, "config": {
        "super.users": "User:admin", "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512"}})
    text = server_properties(OWNER, spec)
    assert text.count("super.users=") == 1 and "super.users=User:admin;User:flotilla-operator;User:flotilla-broker\n" in text
    assert "sasl.enabled.mechanisms=SCRAM-SHA-256,SCRAM-SHA-512\n" in text


def test_a_plaintext_fleet_renders_as_before():
    text = server_properties(OWNER, KafkaClusterSpec.model_validate({"config": {"super.users": "User:admin"}}))
    assert "flotilla-operator" not in text and "sasl.enabled.mechanisms" not in text
    assert "super.users=User:admin\n" in text
