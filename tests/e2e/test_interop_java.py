"""The Java client (kafka-clients, tests/java/client-check) against the broker.

Needs Java 17 and Maven; `scripts/setup.d/10-clients.sh` builds the client. A missing tool fails
these tests (it does not skip them).
"""

import pytest

from tests.support.interop_suite import AdminScenarios, InteropSuite

pytestmark = pytest.mark.java


class TestJavaClient(InteropSuite, AdminScenarios):
    family_name = "java"

    @pytest.mark.timeout(90)
    def test_describe_cluster(self, client, shared_broker):
        d = client.describe_cluster(shared_broker.bootstrap)
        assert d["cluster_id"], "no cluster id"
        assert [(h, p) for _, h, p in d["nodes"]] == [(shared_broker.host, shared_broker.advertised_port)]
        assert d["controller"] in [n for n, _, _ in d["nodes"]]

    @pytest.mark.timeout(90)
    def test_generated_records_use_the_java_partitioner(self, client, shared_broker):
        """`produce --count` (used by benchmarks) sends key-(i % K) records; the Java client's own
        murmur2 partitioner must agree with the partitions the broker stored them in."""
        from tests.support import java_client
        from tests.support.clients import murmur2_partition
        from tests.support.interop_suite import make_topic
        from tests.support.verify import read_all

        topic = make_topic(shared_broker, 5, "java-count")
        out = java_client.run(
            "produce", "--bootstrap", shared_broker.bootstrap, "--topic", topic, "--count", "250",
            "--keys", "25", "--value-size", "64", "--compression", "zstd",
        ).stdout.splitlines()
        assert len(out) == 250
        got = read_all(shared_broker.bootstrap, topic, range(5))
        assert len(got) == 250
        assert sorted(r.value for r in got) == sorted(f"value-{i}".ljust(64, "x") for i in range(250))
        for r in got:
            assert r.partition == murmur2_partition(r.key, 5)
