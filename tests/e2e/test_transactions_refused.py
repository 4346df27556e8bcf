"""What is still refused of transactions (KIP-98) on this branch: the transaction coordinator
answers FindCoordinator, InitProducerId, AddPartitionsToTxn and EndTxn
(test_transaction_coordinator.py), but a transactional Produce still gets the one refusal clients
treat as fatal, TRANSACTIONAL_ID_AUTHORIZATION_FAILED with a message, and nothing is appended
(the partition side is a separate change)."""

from __future__ import annotations

import datetime

import pytest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i16, i32

from tests.support import kafka_wire
from tests.support.broker_process import ServerProcess

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
pytestmark = pytest.mark.flotilla_only("Apache Kafka serves transactions")


@pytest.mark.timeout(60)
def test_a_transactional_produce_is_refused_and_nothing_appended(shared_broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("txr")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        produced = conn.request(ProduceRequest(
            transactional_id="tx-1", acks=i16(-1), timeout=datetime.timedelta(seconds=5),
            topic_data=(TopicProduceData(name=topic, partition_data=(
                PartitionProduceData(index=i32(0), records=kafka_wire.build_batch([(b"k", b"v")])),)),)))
        part = produced.responses[0].partition_responses[0]
        assert int(part.error_code) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert conn.list_offsets(topic, 0) == 0, "a transactional batch was appended"
