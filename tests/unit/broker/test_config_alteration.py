"""The config transformations of AlterConfigs and IncrementalAlterConfigs (pure functions)."""

import pytest
from kio.schema.errors import ErrorCode

from broker.admin.config_alteration import (APPEND, BROKER, DELETE, SET, SUBTRACT, TOPIC, AlterationError,
                                             incremental, java_int, refused_broker_name, replace_all)

IN_FORCE = {"cleanup.policy": "delete", "retention.ms": "604800000"}


def in_force(current):
    return {**IN_FORCE, **current}


def test_operations_apply_in_order_to_the_current_configs():
    change = incremental([("retention.ms", SET, "5"), ("segment.ms", DELETE, None),
                          ("cleanup.policy", APPEND, "compact")], in_force)
    assert change({"segment.ms": "10", "flush.ms": "3"}) == {"retention.ms": "5", "flush.ms": "3",
                                                             "cleanup.policy": "delete,compact"}


def test_append_and_subtract_start_from_the_topic_value_and_skip_what_is_there():
    assert incremental([("cleanup.policy", APPEND, "delete")], in_force)({}) == {"cleanup.policy": "delete"}
    assert incremental([("cleanup.policy", SUBTRACT, "delete")], in_force)(
        {"cleanup.policy": "compact,delete"}) == {"cleanup.policy": "compact"}


@pytest.mark.parametrize("entries, code", [
    ([("a", SET, "1"), ("a", DELETE, None)], ErrorCode.invalid_request),
    ([("retention.ms", SET, None)], ErrorCode.invalid_request),
    ([("retention.ms", APPEND, "1")], ErrorCode.invalid_config),
    ([("retention.ms", 9, "1")], ErrorCode.invalid_request),
])
def test_refusals(entries, code):
    with pytest.raises(AlterationError) as e:
        incremental(entries, in_force)
    assert e.value.code == code


def test_alter_configs_replaces_everything():
    assert replace_all([("retention.ms", "5")])({"segment.ms": "1"}) == {"retention.ms": "5"}
    with pytest.raises(AlterationError):
        replace_all([("retention.ms", None)])


def test_only_deleting_the_never_set_log_dir_throttle_of_a_broker_is_answered_without_the_store():
    from broker.admin.config_alteration import BROKER, TOPIC, deletes_unset_broker_keys

    clear = [("replica.alter.log.dirs.io.max.bytes.per.second", DELETE, None)]
    assert deletes_unset_broker_keys(BROKER, clear)
    assert not deletes_unset_broker_keys(TOPIC, clear)
    assert not deletes_unset_broker_keys(BROKER, clear + [("leader.replication.throttled.rate", DELETE, None)])
    assert not deletes_unset_broker_keys(BROKER, [])


async def test_broker_throttle_rates_are_set_per_broker_and_default_and_cleared_as_the_reassign_tool_does(tmp_path):
    from broker.metadata.broker_configs import FileBrokerConfigStore
    from broker.admin.config_alteration import BROKER, BROKER_LOGGER, alter

    store = FileBrokerConfigStore(tmp_path)

    def inc(entries):
        return lambda: incremental(entries, lambda current: current)
    assert (await alter(None, BROKER, "2", inc([("leader.replication.throttled.rate", SET, "50000"),
                                                ("follower.replication.throttled.rate", SET, "60000")]),
                        False, store)).error_code == ErrorCode.none
    assert (await alter(None, BROKER, "", inc([("leader.replication.throttled.rate", SET, "7")]), False, store)
            ).error_code == ErrorCode.none
    assert store.configs["2"] == {"leader.replication.throttled.rate": "50000",
                                  "follower.replication.throttled.rate": "60000"}
    assert FileBrokerConfigStore(tmp_path).configs == store.configs  # survives a restart
    bad = await alter(None, BROKER, "2", inc([("log.dirs", SET, "/x")]), False, store)
    assert bad.error_code == ErrorCode.invalid_request and "log.dirs" in bad.error_message  # as Kafka
    bad = await alter(None, BROKER, "2", inc([("leader.replication.throttled.rate", SET, "fast")]), False, store)
    assert bad.error_code == ErrorCode.invalid_request
    assert (await alter(None, BROKER, "x", inc([]), False, store)).error_code == ErrorCode.invalid_request
    assert (await alter(None, BROKER_LOGGER, "2", inc([]), False, store)).error_code == ErrorCode.invalid_request
    assert (await alter(None, BROKER, "1", inc([("leader.replication.throttled.rate", SET, "1")]), True, store)
            ).error_code == ErrorCode.none
    assert "1" not in store.configs  # validate_only writes nothing
    clear = [("leader.replication.throttled.rate", DELETE, None), ("follower.replication.throttled.rate", DELETE, None),
             ("replica.alter.log.dirs.io.max.bytes.per.second", DELETE, None)]
    for entity in ("2", "", "3"):
        assert (await alter(None, BROKER, entity, inc(clear), False, store)).error_code == ErrorCode.none
    assert dict(store.configs) == {}


@pytest.mark.parametrize("text, value", [("1", 1), ("01", 1), ("+3", 3), ("-1", -1), ("2147483647", 2**31 - 1),
                                         (" 1", None), ("1_0", None), ("", None), ("x", None), ("2147483648", None),
                                         ("\u0661", None)])
def test_java_int_reads_what_integer_parse_int_reads(text, value):
    assert java_int(text) == value


def test_a_broker_resource_names_this_broker_or_the_cluster_default():
    assert refused_broker_name(BROKER, "", 1) is None
    assert refused_broker_name(BROKER, "1", 1) is None
    assert refused_broker_name(BROKER, "01", 1) is None
    assert refused_broker_name(TOPIC, "7", 1) is None  # a topic named 7
    other = refused_broker_name(BROKER, "7", 1)
    assert (other.error_code, other.error_message) == (ErrorCode.invalid_request,
                                                       "Unexpected broker id, expected 1, but received 7")
    bad = refused_broker_name(BROKER, "one", 1)
    assert (bad.error_code, bad.error_message) == (ErrorCode.invalid_request,
                                                   "Node id must be an integer, but it is: one")


def test_a_broker_resource_name_is_refused_in_the_words_of_the_api_asking():
    from broker.admin.config_alteration import broker_name_refusal

    assert broker_name_refusal("", 1) is None and broker_name_refusal("01", 1) is None
    assert broker_name_refusal("7", 1) == "Unexpected broker id, expected 1, but received 7"
    assert broker_name_refusal("7", 1, describing=True) == "Unexpected broker id, expected 1 or empty string, but received 7"
    assert broker_name_refusal(" 1", 1) == "Node id must be an integer, but it is:  1"
    assert broker_name_refusal("x", 1, describing=True) == "Broker id must be an integer, but it is: x"
