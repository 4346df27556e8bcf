"""The config transformations of AlterConfigs and IncrementalAlterConfigs (pure functions)."""

import pytest
from kio.schema.errors import ErrorCode

from broker.server.config_alteration import (APPEND, DELETE, SET, SUBTRACT, AlterationError, incremental,
                                             replace_all)

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


def test_only_deleting_the_reassignment_throttle_rates_of_a_broker_is_answered_as_done():
    from broker.server.config_alteration import BROKER, TOPIC, deletes_unset_broker_keys

    clear = [("leader.replication.throttled.rate", DELETE, None), ("follower.replication.throttled.rate", DELETE, None),
             ("replica.alter.log.dirs.io.max.bytes.per.second", DELETE, None)]
    assert deletes_unset_broker_keys(BROKER, clear)
    assert not deletes_unset_broker_keys(TOPIC, clear)
    assert not deletes_unset_broker_keys(BROKER, [("leader.replication.throttled.rate", SET, "100")])
    assert not deletes_unset_broker_keys(BROKER, clear + [("log.cleaner.threads", DELETE, None)])
    assert not deletes_unset_broker_keys(BROKER, [])
