"""sasl.jaas.config values as Kafka writes them."""

import pytest

from broker.security import jaas


def test_plain_login_module_users():
    e = jaas.parse('org.apache.kafka.common.security.plain.PlainLoginModule required '
                   'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="a;b \\"c\\"";')
    assert e.login_module == jaas.PLAIN_LOGIN_MODULE and e.flag == "required"
    assert e.users() == {"admin": "admin-secret", "alice": 'a;b "c"'}


def test_unquoted_values_and_whitespace():
    e = jaas.parse("  org.apache.kafka.common.security.plain.PlainLoginModule   Required\n  user_bob=pw ;  ")
    assert e.users() == {"bob": "pw"}


@pytest.mark.parametrize("text,error", [
    ("org.example.Login required user_a=\"x\"", "cannot parse"),  # no terminating ';'
    ("org.example.Login maybe;", "control flag"),
    ("org.example.Login required; org.example.Other required;", "exactly one"),
    ("", "expected"),
])
def test_malformed(text, error):
    with pytest.raises(ValueError, match=error):
        jaas.parse(text)
