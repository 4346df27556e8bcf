"""Principals: the certificate subject as Kafka writes it, and ssl.principal.mapping.rules."""

import pytest
from cryptography.hazmat.primitives.serialization import Encoding

from broker.security.principal import ANONYMOUS, PrincipalMapper, certificate_subject, user
from flotilla.testenv.brokers.tls_certs import make_pki


def test_principal_strings_are_what_acls_name():
    assert str(ANONYMOUS) == "User:ANONYMOUS"
    assert str(user("alice")) == "User:alice"


def test_certificate_subject_most_specific_first(tmp_path):
    pki = make_pki(tmp_path)
    der = pki.clients["alice"].cert.public_bytes(Encoding.DER)
    assert certificate_subject(der) == "CN=alice,OU=clients,O=Flotilla Tests"


def test_default_rule_keeps_the_dn():
    assert PrincipalMapper("DEFAULT").name("CN=alice,OU=clients,O=Flotilla Tests") == "CN=alice,OU=clients,O=Flotilla Tests"


def test_rules_in_order_first_whole_match_wins():
    m = PrincipalMapper(r"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/L,DEFAULT")
    assert m.name("CN=kafka-svc,OU=ServiceUsers,O=Org") == "kafka-svc"
    assert m.name("CN=Alice,OU=Clients,O=Org") == "alice@clients"
    assert m.name("CN=bob") == "CN=bob"  # falls through to DEFAULT


def test_upper_case_and_escaped_slash():
    m = PrincipalMapper(r"RULE:^CN=([^,]*).*$/team\/$1/U")
    assert m.name("CN=alice,O=x") == "TEAM/ALICE"


def test_no_matching_rule_refuses():
    m = PrincipalMapper(r"RULE:^CN=admin$/admin/")
    with pytest.raises(ValueError, match="no rule"):
        m.name("CN=alice")


def test_malformed_rules_are_refused():
    with pytest.raises(ValueError, match="invalid rule"):
        PrincipalMapper("RULE:^CN=(.*)$")
