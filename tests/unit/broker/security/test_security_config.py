"""Security keys in broker/config.py: Kafka's listener.name.<listener>.<key> forms and properties
continuation lines (inline PEM)."""

import pytest

from broker.config import ConfigError, parse_config, parse_properties


def test_listener_prefixed_keys_override_the_broker_wide_value():
    cfg = parse_config({"listeners": "A://127.0.0.1:1,B://127.0.0.1:2",
                        "listener.security.protocol.map": "A:SASL_PLAINTEXT,B:SASL_PLAINTEXT",
                        "sasl.enabled.mechanisms": "scram-sha-512",
                        "listener.name.b.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256"})
    assert cfg.listener_value("A", "sasl.enabled.mechanisms") == ("SCRAM-SHA-512",)
    assert cfg.listener_value("B", "sasl.enabled.mechanisms") == ("PLAIN", "SCRAM-SHA-256")
    assert cfg.protocol_of("b") == "SASL_PLAINTEXT"


def test_unknown_listener_prefixed_keys_are_refused():
    with pytest.raises(ConfigError, match="unknown configuration key 'listener.name.a.gssapi.sasl.jaas.config'"):
        parse_config({"listener.name.a.gssapi.sasl.jaas.config": "x required;"})
    with pytest.raises(ConfigError, match="listener.name.a.plain.sasl.jaas.config"):
        parse_config({"listener.name.a.plain.sasl.jaas.config": "no semicolon"})


def test_mapping_rules_are_checked_at_start():
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules"):
        parse_config({"ssl.principal.mapping.rules": "RULE:broken"})


def test_properties_continuation_lines_join_inline_pem():
    props = parse_properties("ssl.keystore.key=-----BEGIN PRIVATE KEY----- \\\n  QUJD\\\n  -----END PRIVATE KEY-----\n"
                             "a=ends with two backslashes \\\\\nb=2\n")
    assert props["ssl.keystore.key"] == "-----BEGIN PRIVATE KEY----- QUJD-----END PRIVATE KEY-----"
    assert props["a"] == "ends with two backslashes \\\\" and props["b"] == "2"
