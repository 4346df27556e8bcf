"""Shared fixtures for the operator's unit tests."""

from __future__ import annotations

import pytest

from flotilla_operator.builders.common import Owner
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec


@pytest.fixture
def owner() -> Owner:
    return Owner(name="demo", namespace="kafka", uid="6f1c1c8e-3b54-4b8e-9a56-0b7f7d0e6a11", generation=3)


@pytest.fixture
def spec() -> KafkaClusterSpec:
    return KafkaClusterSpec.model_validate({"replicas": 3, "config": {"log.retention.ms": "3600000"}})
