"""Replication keys in the rendered server.properties: sized to the fleet unless spec.config sets
them, and refused (naming the key) when a set value cannot work with spec.replicas brokers."""

from __future__ import annotations

import pytest

from flotilla_operator.builders.configmap import replication_defaults, server_properties
from flotilla_operator.api.common import parse_spec
from flotilla_operator.api.kafka_cluster import KAFKA_CLUSTER, KafkaClusterSpec
from flotilla_operator.preflight import check_server_properties


def _props(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#"))


@pytest.mark.parametrize(
    "replicas, rf, min_isr",
    [(1, "1", "1"), (2, "2", "1"), (3, "3", "2"), (5, "3", "2"), (64, "3", "2")],
)
def test_defaults_follow_the_fleet_size(owner, replicas, rf, min_isr):
    spec = KafkaClusterSpec.model_validate({"replicas": replicas})
    props = _props(server_properties(owner, spec))
    assert props["default.replication.factor"] == rf
    assert props["offsets.topic.replication.factor"] == rf
    # One fewer than the replication factor: one broker restarting never fails acks=all.
    assert props["min.insync.replicas"] == min_isr
    # The broker's own parser accepts the rendered file (the operator's preflight check).
    assert check_server_properties(server_properties(owner, spec)) is None


def test_user_values_win_and_are_written_once(owner):
    spec = KafkaClusterSpec.model_validate(
        {"replicas": 5, "config": {"min.insync.replicas": 3, "default.replication.factor": "4"}}
    )
    text = server_properties(owner, spec)
    lines = text.splitlines()
    assert lines.count("min.insync.replicas=3") == 1
    assert lines.count("default.replication.factor=4") == 1
    assert not any(l.startswith("min.insync.replicas=") and l != "min.insync.replicas=3" for l in lines)
    # The key the user left unset still gets the fleet default.
    assert _props(text)["offsets.topic.replication.factor"] == "3"
    assert replication_defaults(spec) == {"offsets.topic.replication.factor": "3"}


def test_min_isr_default_follows_a_user_replication_factor(owner):
    spec = KafkaClusterSpec.model_validate({"replicas": 5, "config": {"default.replication.factor": 1}})
    assert replication_defaults(spec)["min.insync.replicas"] == "1"


@pytest.mark.parametrize(
    "replicas, config, field",
    [
        (3, {"min.insync.replicas": "4"}, "spec.config.min.insync.replicas=4 exceeds spec.replicas (3)"),
        (2, {"default.replication.factor": 3}, "spec.config.default.replication.factor=3 exceeds spec.replicas (2)"),
        (1, {"offsets.topic.replication.factor": "2"}, "spec.config.offsets.topic.replication.factor=2 exceeds spec.replicas (1)"),
        (5, {"default.replication.factor": 2, "min.insync.replicas": 3},
         "spec.config.min.insync.replicas=3 exceeds default.replication.factor (2)"),
        (3, {"min.insync.replicas": "two"}, "spec.config.min.insync.replicas must be a whole number"),
        (3, {"default.replication.factor": 0}, "spec.config.default.replication.factor must be at least 1"),
    ],
)
def test_values_that_cannot_work_are_refused_naming_the_key(replicas, config, field):
    with pytest.raises(ValueError) as err:
        parse_spec(KAFKA_CLUSTER, {"replicas": replicas, "config": config})
    assert field in str(err.value)


def test_scaling_below_a_set_replication_factor_is_refused():
    parse_spec(KAFKA_CLUSTER, {"replicas": 3, "config": {"min.insync.replicas": 2}})
    with pytest.raises(ValueError, match=r"spec.config.min.insync.replicas=2 exceeds spec.replicas \(1\)"):
        parse_spec(KAFKA_CLUSTER, {"replicas": 1, "config": {"min.insync.replicas": 2}})


def test_scaling_rolls_only_when_the_defaults_change(owner):
    def text(n: int) -> str:
        return server_properties(owner, KafkaClusterSpec.model_validate({"replicas": n}))

    # 3 brokers and more share one file (no roll); growing from 1 or 2 changes the defaults.
    assert text(3) == text(4) == text(9)
    assert text(1) != text(2) != text(3)
