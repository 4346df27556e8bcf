"""The log cleaner's dynamic broker keys over the wire (kio's IncrementalAlterConfigs and
DescribeConfigs): set on the broker and as the cluster default, described with their sources and
synonyms (own > cluster default > server.properties > Kafka's default), refused as Kafka refuses
them (types, bounds, the thread count's steps, the dedupe buffer per thread), and deleted. The
same expectations hold against Apache Kafka 4.1 (`--kafka-target=apache`); the Flotilla-only test
checks that the running cleaner took the values (its /metrics)."""

from __future__ import annotations

import re
import urllib.request

import pytest
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8

from flotilla.testenv import kafka_wire
from flotilla.testenv.waiting import wait_for

pytestmark = pytest.mark.broker_config({"log.cleaner.io.buffer.size": "262144"})

BROKER = 4
SET, DELETE = 0, 1
INT, LONG, DOUBLE = 3, 5, 6
DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 2, 3, 4, 5
THREADS, DEDUPE, IO_BUFFER = "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.size"
LOAD_FACTOR, IO_MAX, BACKOFF = ("log.cleaner.io.buffer.load.factor", "log.cleaner.io.max.bytes.per.second",
                                "log.cleaner.backoff.ms")
KEYS = (THREADS, DEDUPE, IO_BUFFER, LOAD_FACTOR, IO_MAX, BACKOFF)
TYPES = {THREADS: INT, DEDUPE: LONG, IO_BUFFER: INT, LOAD_FACTOR: DOUBLE, IO_MAX: DOUBLE, BACKOFF: LONG}
DEFAULTS = {THREADS: "1", DEDUPE: "134217728", IO_BUFFER: "524288", LOAD_FACTOR: "0.9",
            IO_MAX: "1.7976931348623157E308", BACKOFF: "15000"}


def alter(conn, resource: str, ops: list[tuple[str, int, str | None]], validate_only: bool = False):
    from kio.schema.incremental_alter_configs.v1.request import (AlterableConfig, AlterConfigsResource,
                                                                 IncrementalAlterConfigsRequest)

    resp = conn.request(IncrementalAlterConfigsRequest(
        resources=(AlterConfigsResource(resource_type=i8(BROKER), resource_name=resource, configs=tuple(
            AlterableConfig(name=n, config_operation=i8(op), value=v) for n, op, v in ops)),),
        validate_only=validate_only))
    [r] = resp.responses
    return r.error_code, r.error_message


def describe(conn, resource: str) -> dict[str, tuple]:
    """key -> (value, source, synonyms as (value, source), read_only, type) of the cleaner keys."""
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    resp = conn.request(DescribeConfigsRequest(
        resources=(DescribeConfigsResource(resource_type=i8(BROKER), resource_name=resource,
                                           configuration_keys=KEYS),),
        include_synonyms=True, include_documentation=False))
    [result] = resp.results
    assert result.error_code == ErrorCode.none, result.error_message
    return {c.name: (c.value, int(c.config_source), [(s.value, int(s.source)) for s in c.synonyms], c.read_only,
                     int(c.config_type)) for c in result.configs}


def shows(conn, resource: str, expected: dict[str, tuple[str, int]]):
    """Wait until DescribeConfigs shows `expected` (key -> (value, source)); Kafka applies an
    alteration once its metadata reaches the broker."""
    return wait_for(f"broker {resource!r} to describe {expected}",
                    lambda: describe(conn, resource),
                    until=lambda got: all(k in got and got[k][:2] == v for k, v in expected.items()), timeout=30)


def test_cleaner_keys_are_set_described_refused_and_deleted_as_kafka_does(broker):
    with kafka_wire.connect(broker.bootstrap) as conn:
        node = str(conn.metadata([]).brokers[0].node_id)
        got = describe(conn, node)
        assert {k: v[4] for k, v in got.items()} == TYPES
        assert not any(v[3] for v in got.values()), "dynamic keys are not read-only"
        assert {k: v[:3] for k, v in got.items() if k != IO_BUFFER} == {
            k: (DEFAULTS[k], DEFAULT_CONFIG, [(DEFAULTS[k], DEFAULT_CONFIG)]) for k in KEYS if k != IO_BUFFER}
        assert got[IO_BUFFER][:3] == ("262144", STATIC_BROKER_CONFIG,
                                      [("262144", STATIC_BROKER_CONFIG), ("524288", DEFAULT_CONFIG)])
        assert describe(conn, "") == {}

        # per broker, then the cluster default beneath it
        assert alter(conn, node, [(THREADS, SET, "2"), (IO_MAX, SET, "1000000.0"), (BACKOFF, SET, "100"),
                                  (IO_BUFFER, SET, "131072")]) == (ErrorCode.none, None)
        shows(conn, node, {THREADS: ("2", DYNAMIC_BROKER_CONFIG), IO_MAX: ("1000000.0", DYNAMIC_BROKER_CONFIG)})
        assert alter(conn, "", [(BACKOFF, SET, "500"), (LOAD_FACTOR, SET, "0.8")]) == (ErrorCode.none, None)
        got = shows(conn, node, {LOAD_FACTOR: ("0.8", DYNAMIC_DEFAULT_BROKER_CONFIG)})
        assert got[BACKOFF][:3] == ("100", DYNAMIC_BROKER_CONFIG, [
            ("100", DYNAMIC_BROKER_CONFIG), ("500", DYNAMIC_DEFAULT_BROKER_CONFIG), ("15000", DEFAULT_CONFIG)])
        assert got[IO_BUFFER][2] == [("131072", DYNAMIC_BROKER_CONFIG), ("262144", STATIC_BROKER_CONFIG),
                                     ("524288", DEFAULT_CONFIG)]
        cluster = describe(conn, "")
        assert {k: v[:3] for k, v in cluster.items()} == {
            BACKOFF: ("500", DYNAMIC_DEFAULT_BROKER_CONFIG, [("500", DYNAMIC_DEFAULT_BROKER_CONFIG)]),
            LOAD_FACTOR: ("0.8", DYNAMIC_DEFAULT_BROKER_CONFIG, [("0.8", DYNAMIC_DEFAULT_BROKER_CONFIG)])}

        # refusals (the broker has 2 threads now): Kafka's ConfigException is INVALID_REQUEST
        refused = {
            "more than double": [(THREADS, SET, "5")],
            "below half": [(THREADS, SET, "0")],
            "not an INT": [(THREADS, SET, "two")],
            "negative io buffer": [(IO_BUFFER, SET, "-1")],
            "1 MiB dedupe per thread": [(DEDUPE, SET, str(2 * 1024 * 1024))],
            "not a DOUBLE": [(IO_MAX, SET, "fast")],
            "not dynamic": [("log.dirs", SET, "/elsewhere")],
        }
        for why, ops in refused.items():
            code, message = alter(conn, node, ops)
            assert code == ErrorCode.invalid_request, f"{why}: {code} {message}"
        for why in ("not an INT", "negative io buffer", "1 MiB dedupe per thread", "not a DOUBLE", "not dynamic"):
            code, message = alter(conn, "", refused[why])
            assert code == ErrorCode.invalid_request, f"{why} as the cluster default: {code} {message}"
        # the thread steps are checked on what the broker would run: its own value wins over a default
        assert alter(conn, "", [(THREADS, SET, "5")], validate_only=True) == (ErrorCode.none, None)
        code, _ = alter(conn, node, [(THREADS, SET, "4")], validate_only=True)
        assert code == ErrorCode.none
        assert describe(conn, node)[THREADS][:2] == ("2", DYNAMIC_BROKER_CONFIG)  # validate_only changed nothing

        # deleted: back to the properties and Kafka's defaults
        assert alter(conn, node, [(k, DELETE, None) for k in KEYS]) == (ErrorCode.none, None)
        assert alter(conn, "", [(BACKOFF, DELETE, None), (LOAD_FACTOR, DELETE, None)]) == (ErrorCode.none, None)
        got = shows(conn, node, {THREADS: ("1", DEFAULT_CONFIG), BACKOFF: ("15000", DEFAULT_CONFIG),
                                 LOAD_FACTOR: ("0.9", DEFAULT_CONFIG), IO_BUFFER: ("262144", STATIC_BROKER_CONFIG)})
        assert describe(conn, "") == {}


def test_a_broker_resource_is_this_broker_or_the_cluster_default(broker):
    """Kafka's admin client sends a broker's own configs to that broker; a broker refuses another
    broker's id (and a name that is not an integer) with Kafka's messages, in both APIs and in
    DescribeConfigs, and takes its own id however Java's parseInt reads it ("01")."""
    from kio.schema.alter_configs.v2.request import AlterableConfig, AlterConfigsRequest, AlterConfigsResource
    from kio.schema.describe_configs.v4.request import DescribeConfigsRequest, DescribeConfigsResource

    def described(name: str):
        resp = conn.request(DescribeConfigsRequest(resources=(DescribeConfigsResource(
            resource_type=i8(BROKER), resource_name=name, configuration_keys=(BACKOFF,)),),
            include_synonyms=False, include_documentation=False))
        [r] = resp.results
        return r.error_code, r.error_message, len(r.configs)

    with kafka_wire.connect(broker.bootstrap) as conn:
        node = conn.metadata([]).brokers[0].node_id
        other = str(node + 6)
        expected = (ErrorCode.invalid_request, f"Unexpected broker id, expected {node}, but received {other}")
        assert alter(conn, other, [(BACKOFF, SET, "20000")]) == expected
        assert alter(conn, other, [(BACKOFF, SET, "20000")], validate_only=True) == expected
        # even deleting a key nothing sets (what kafka-reassign-partitions.sh --verify sends)
        assert alter(conn, other, [("replica.alter.log.dirs.io.max.bytes.per.second", DELETE, None)]) == expected
        legacy = conn.request(AlterConfigsRequest(resources=(AlterConfigsResource(
            resource_type=i8(BROKER), resource_name=other, configs=(AlterableConfig(name=BACKOFF, value="20000"),)),),
            validate_only=False))
        assert [(r.error_code, r.error_message) for r in legacy.responses] == [expected]
        assert alter(conn, " 1", [(BACKOFF, SET, "20000")]) == (
            ErrorCode.invalid_request, "Node id must be an integer, but it is:  1")
        assert described(other) == (ErrorCode.invalid_request,
                                    f"Unexpected broker id, expected {node} or empty string, but received {other}", 0)
        assert described("x") == (ErrorCode.invalid_request, "Broker id must be an integer, but it is: x", 0)
        assert describe(conn, str(node))[BACKOFF][:2] == ("15000", DEFAULT_CONFIG)  # nothing was set

        # Java's parseInt reads "01" as this broker (Kafka then stores the value under "01", where no
        # broker reads it; Flotilla under "1": the value is not checked here, only the name).
        padded = f"0{node}"
        assert described(padded)[:2] == (ErrorCode.none, None) or described(padded)[:2] == (ErrorCode.none, "")
        assert alter(conn, padded, [(BACKOFF, DELETE, None)]) == (ErrorCode.none, None)


def metric(broker, name: str) -> float:
    with urllib.request.urlopen(broker.metrics_url, timeout=5) as resp:
        text = resp.read().decode()
    m = re.search(rf"^{name} ([0-9.e+]+)$", text, re.M)
    assert m, f"{name} is not on /metrics"
    return float(m.group(1))


@pytest.mark.flotilla_only("reads Flotilla's /metrics")
def test_the_running_cleaner_takes_the_thread_count(broker):
    with kafka_wire.connect(broker.bootstrap) as conn:
        node = str(conn.metadata([]).brokers[0].node_id)
        assert metric(broker, "flotilla_log_cleaner_threads") == 1
        assert alter(conn, "", [(THREADS, SET, "2")]) == (ErrorCode.none, None)
        wait_for("two cleaner workers", lambda: metric(broker, "flotilla_log_cleaner_threads") == 2, timeout=30)
        assert alter(conn, node, [(THREADS, SET, "1")]) == (ErrorCode.none, None)  # own value beats the default
        wait_for("one cleaner worker", lambda: metric(broker, "flotilla_log_cleaner_threads") == 1, timeout=60)
