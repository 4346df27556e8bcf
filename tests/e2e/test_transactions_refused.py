"""Until transactions (KIP-98) land, every transactional request gets one refusal that clients
treat as fatal, with a message (issue 8, item 9): FindCoordinator for a transactional id and
InitProducerId with one answer TRANSACTIONAL_ID_AUTHORIZATION_FAILED. (Transactional Produce
batches are accepted: the partition side is in place, test_transactions_partition.py.)"""

from __future__ import annotations

import datetime

import pytest
from confluent_kafka import KafkaException, Producer
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.static.primitive import i8, i16

from tests.support import kafka_wire
from tests.support.broker_process import ServerProcess

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
pytestmark = pytest.mark.flotilla_only("Apache Kafka serves transactions")


@pytest.mark.timeout(120)
def test_confluent_init_transactions_fails_fast_with_a_fatal_error(shared_broker: ServerProcess) -> None:
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "transactional.id": "tx-refused",
                         "transaction.timeout.ms": 10000})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(60)  # a retriable refusal would end in _TIMED_OUT after 60 s
    error = raised.value.args[0]
    assert error.code() == TRANSACTIONAL_ID_AUTHORIZATION_FAILED, error
    assert error.fatal(), f"not fatal: {error}"
    assert "transactions are not supported" in error.str(), error.str()


@pytest.mark.timeout(60)
def test_every_transactional_request_gets_the_same_refusal(shared_broker: ServerProcess) -> None:
    topic = kafka_wire.unique_topic("txr")
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        assert int(conn.create_topic(topic, 1)) == 0
        found = conn.request(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=("tx-1",)))
        assert [int(c.error_code) for c in found.coordinators] == [TRANSACTIONAL_ID_AUTHORIZATION_FAILED]
        assert "not supported" in found.coordinators[0].error_message
        init = conn.request(InitProducerIdRequest(transactional_id="tx-1",
                                                  transaction_timeout=datetime.timedelta(seconds=10),
                                                  producer_id=-1, producer_epoch=i16(-1)))
        assert int(init.error_code) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
