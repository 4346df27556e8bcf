"""The broker seen through raw Produce requests (kio types over a socket): idempotent producer
sequence checks that no real client lets a test provoke on purpose, and the HTTP side endpoints."""

from __future__ import annotations

import datetime
import urllib.request

import pytest

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.static.primitive import i16, i32

from flotilla.testenv import kafka_wire
from flotilla.testenv.brokers.broker_process import ServerProcess
from tests.support.verify import read_all

OUT_OF_ORDER_SEQUENCE_NUMBER = 45


def batch(pid: int, epoch: int, seq: int, n: int, tag: str) -> bytes:
    return kafka_wire.build_batch(
        [(b"k", f"{tag}-{i}".encode()) for i in range(n)], producer_id=pid, producer_epoch=epoch, base_sequence=seq
    )


def new_topic(conn: kafka_wire.KafkaConnection) -> str:
    topic = kafka_wire.unique_topic("wire")
    assert int(conn.create_topic(topic, 1)) == 0
    return topic


@pytest.mark.timeout(60)
def test_same_batch_twice_is_appended_once(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        topic = new_topic(conn)
        pid, epoch = conn.init_producer_id()
        assert pid >= 0 and epoch >= 0
        first = batch(pid, epoch, 0, 3, "a")
        r1 = conn.produce(topic, 0, first)
        assert r1.error_code == ErrorCode.none and int(r1.base_offset) == 0
        r2 = conn.produce(topic, 0, first)  # a retry of the same batch
        assert r2.error_code == ErrorCode.none, f"duplicate answered {r2.error_code!r}, not success"
        assert int(r2.base_offset) == 0, "the retry must be answered with the original offset"
        assert conn.list_offsets(topic, 0) == 3, "the duplicate was appended"
        r3 = conn.produce(topic, 0, batch(pid, epoch, 3, 2, "b"))
        assert r3.error_code == ErrorCode.none and int(r3.base_offset) == 3
    got = read_all(shared_broker.bootstrap, topic, (0,))
    assert [r.value for r in got] == ["a-0", "a-1", "a-2", "b-0", "b-1"]


@pytest.mark.timeout(60)
def test_retry_of_an_older_inflight_batch_is_deduplicated(shared_broker: ServerProcess) -> None:
    """Kafka remembers the last five batches per producer; a retry of any of them is a duplicate."""
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        topic = new_topic(conn)
        pid, epoch = conn.init_producer_id()
        batches = [batch(pid, epoch, 2 * i, 2, f"b{i}") for i in range(4)]
        for i, b in enumerate(batches):
            r = conn.produce(topic, 0, b)
            assert r.error_code == ErrorCode.none and int(r.base_offset) == 2 * i
        again = conn.produce(topic, 0, batches[1])
        assert again.error_code == ErrorCode.none and int(again.base_offset) == 2
        assert conn.list_offsets(topic, 0) == 8


@pytest.mark.timeout(60)
def test_sequence_gap_is_out_of_order(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        topic = new_topic(conn)
        pid, epoch = conn.init_producer_id()
        assert conn.produce_when_led(topic, 0, batch(pid, epoch, 0, 2, "ok")).error_code == ErrorCode.none
        gap = conn.produce(topic, 0, batch(pid, epoch, 5, 1, "gap"))
        assert int(gap.error_code) == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert conn.list_offsets(topic, 0) == 2, "an out-of-order batch was appended"
        # The right next sequence still goes through.
        nxt = conn.produce(topic, 0, batch(pid, epoch, 2, 1, "next"))
        assert nxt.error_code == ErrorCode.none and int(nxt.base_offset) == 2


@pytest.mark.timeout(60)
def test_producers_are_independent(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        topic = new_topic(conn)
        p1, e1 = conn.init_producer_id()
        p2, e2 = conn.init_producer_id()
        assert p1 != p2, "two InitProducerId calls returned the same producer id"
        assert conn.produce_when_led(topic, 0, batch(p1, e1, 0, 1, "p1")).error_code == ErrorCode.none
        # Same sequence number from another producer is not a duplicate.
        r = conn.produce(topic, 0, batch(p2, e2, 0, 1, "p2"))
        assert r.error_code == ErrorCode.none and int(r.base_offset) == 1


@pytest.mark.timeout(120)
@pytest.mark.parametrize("shutdown", ["sigterm", "kill9"])
def test_deduplication_survives_restart(broker: ServerProcess, shutdown: str) -> None:
    """Producer state comes back from a snapshot (clean stop) or from the log (crash)."""
    with kafka_wire.connect(broker.bootstrap) as conn:
        topic = new_topic(conn)
        pid, epoch = conn.init_producer_id()
        last = batch(pid, epoch, 0, 4, "before")
        assert conn.produce(topic, 0, last).error_code == ErrorCode.none
    if shutdown == "kill9":
        broker.kill9()
    else:
        assert broker.stop() in broker.clean_exit_codes
    broker.start()
    with kafka_wire.connect(broker.bootstrap) as conn:
        again = conn.produce(topic, 0, last)
        assert again.error_code == ErrorCode.none and int(again.base_offset) == 0
        assert conn.list_offsets(topic, 0) == 4, "retry after restart was appended again"
        gap = conn.produce(topic, 0, batch(pid, epoch, 9, 1, "gap"))
        assert int(gap.error_code) == OUT_OF_ORDER_SEQUENCE_NUMBER


@pytest.mark.timeout(60)
def test_acks_zero_produce_is_appended(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        topic = new_topic(conn)
        conn.produce(topic, 0, kafka_wire.build_batch([(b"k", b"fire-and-forget")]), acks=0)
        # No response comes for acks=0; the next request on the connection must still be answered.
        assert int(conn.api_versions().error_code) == 0
    got = read_all(shared_broker.bootstrap, topic, (0,), timeout=20)
    assert [r.value for r in got] == ["fire-and-forget"]


@pytest.mark.timeout(30)
@pytest.mark.flotilla_only("Apache Kafka has no HTTP metrics endpoint")
def test_metrics_and_healthz_endpoints(shared_broker: ServerProcess) -> None:
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        conn.api_versions()
    assert shared_broker.metrics_url
    with urllib.request.urlopen(shared_broker.metrics_url, timeout=5) as resp:
        assert resp.status == 200
        text = resp.read().decode()
    assert "# TYPE" in text, "not Prometheus text exposition"
    with urllib.request.urlopen(shared_broker.metrics_url.replace("/metrics", "/healthz"), timeout=5) as resp:
        assert resp.status == 200


@pytest.mark.timeout(30)
@pytest.mark.flotilla_only("Flotilla's start-up banner")
def test_startup_banner_names_bootstrap_and_metrics(shared_broker: ServerProcess) -> None:
    log = shared_broker.log_text()
    assert f"bootstrap address: {shared_broker.bootstrap}" in log
    assert str(shared_broker.metrics_url) in log


@pytest.mark.timeout(60)
def test_pipelined_requests_are_answered_in_order(shared_broker: ServerProcess) -> None:
    """Clients send several requests before reading; answers must come back in request order,
    even when a slow request (Produce acks=-1) precedes fast ones (ApiVersions, Metadata)."""
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        topic = new_topic(conn)

        def produce(i: int) -> ProduceRequest:
            return ProduceRequest(
                transactional_id=None,
                acks=i16(-1),
                timeout=datetime.timedelta(seconds=10),
                topic_data=(
                    TopicProduceData(
                        name=topic,
                        partition_data=(
                            PartitionProduceData(
                                index=i32(0),
                                records=kafka_wire.build_batch([(b"k", f"p-{i}".encode())]),
                            ),
                        ),
                    ),
                ),
            )

        requests = []
        for i in range(30):
            kind = i % 3
            if kind == 0:
                requests.append(produce(i))
            elif kind == 1:
                requests.append(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
            else:
                requests.append(
                    MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
                )
        sent = [(conn.send(r), kafka_wire.response_type_for(r)) for r in requests]
        offsets = []
        for correlation_id, response_type in sent:
            body = conn.receive(response_type, correlation_id)  # raises if out of order
            if response_type.__name__ == "ProduceResponse":
                p = body.responses[0].partition_responses[0]
                assert p.error_code == ErrorCode.none
                offsets.append(int(p.base_offset))
        assert offsets == list(range(10)), f"pipelined produces appended out of order: {offsets}"


@pytest.mark.parametrize("version", [3, 4])
def test_feature_ranges_old_clients_can_parse(shared_broker: ServerProcess, version: int) -> None:
    """Before ApiVersions v4 no supported feature range starts at 0: Kafka leaves such features out
    (KAFKA-17011), since kafka-clients before 3.9, as in Spark 3.5, refuse the range and their network
    thread dies. v4 answers the range as it is."""
    import importlib

    request_type = importlib.import_module(f"kio.schema.api_versions.v{version}.request").ApiVersionsRequest
    with kafka_wire.connect(shared_broker.bootstrap) as conn:
        answer = conn.request(request_type(client_software_name="t", client_software_version="1"))
    assert answer.error_code == ErrorCode.none
    ranges = {f.name: (int(f.min_version), int(f.max_version)) for f in answer.supported_features}
    finalized = {f.name: int(f.max_version_level) for f in answer.finalized_features}
    for name, (lo, hi) in ranges.items():
        assert lo <= hi, (name, lo, hi)
        if version < 4:
            assert lo >= 1, f"{name} offered from {lo} at ApiVersions v{version}: {ranges}"
    # transaction.version's range starts at 0: left out before v4, offered from 0 at v4; finalized at both.
    assert ("transaction.version" in ranges) == (version >= 4), ranges
    if version >= 4:
        assert ranges["transaction.version"][0] == 0, ranges
    assert finalized.get("transaction.version", 0) >= 1, finalized
