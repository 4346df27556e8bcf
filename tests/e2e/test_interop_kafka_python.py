"""kafka-python against the broker: the shared interop scenarios, and kafka-python's own probe of
the broker's version (it picks request versions from what it believes the broker is)."""

import pytest
from kafka import KafkaConsumer

from flotilla.testenv.brokers.broker_process import ServerProcess
from tests.support.interop_suite import AdminScenarios, InteropSuite


class TestKafkaPython(InteropSuite, AdminScenarios):
    family_name = "kafka-python"


@pytest.mark.timeout(60)
def test_version_probe_takes_the_broker_for_a_current_kafka(shared_broker: ServerProcess) -> None:
    """kafka-python infers a broker version from the ApiVersions ranges it is sent; a range it does
    not expect makes it fall back to an old version and to old request versions (no headers, no
    idempotence). Kafka 4.1 is taken for 3.9 or newer by kafka-python 3.x."""
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=10000)
    try:
        probed = consumer.config["api_version"]
    finally:
        consumer.close()
    assert tuple(probed) >= (3, 9), f"kafka-python took the broker for Kafka {probed}"
