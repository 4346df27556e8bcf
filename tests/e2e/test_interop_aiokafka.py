"""aiokafka against the broker: the shared interop scenarios, and the ApiVersions table aiokafka
keeps per connection (it picks each request's version from it)."""

import asyncio

import pytest
from aiokafka import AIOKafkaProducer

from flotilla.testenv.brokers.broker_process import ServerProcess
from tests.support.interop_suite import AdminScenarios, InteropSuite

PRODUCE, FETCH, INIT_PRODUCER_ID = 0, 1, 22


class TestAIOKafka(InteropSuite, AdminScenarios):
    family_name = "aiokafka"


@pytest.mark.timeout(60)
def test_connection_reads_the_broker_api_versions(shared_broker: ServerProcess) -> None:
    """aiokafka parses ApiVersions on each connection; a response it cannot parse leaves the table
    empty and it falls back to its oldest request versions."""

    async def versions() -> dict:
        producer = AIOKafkaProducer(bootstrap_servers=shared_broker.bootstrap, request_timeout_ms=10000)
        await producer.start()
        try:
            for broker in producer.client.cluster.brokers():
                assert await producer.client.ready(broker.nodeId), f"aiokafka could not connect to {broker}"
            tables = [conn._versions for conn in producer.client._conns.values()]
        finally:
            await producer.stop()
        assert tables, "aiokafka opened no connection"
        return tables[0]

    table = asyncio.run(versions())
    for api, at_least in ((PRODUCE, 9), (FETCH, 11), (INIT_PRODUCER_ID, 3)):
        assert api in table, f"api key {api} missing from aiokafka's ApiVersions table: {table}"
        assert table[api][1] >= at_least, f"api key {api}: aiokafka read max version {table[api][1]}"
