"""confluent-kafka (librdkafka) against the broker: the shared interop scenarios plus DescribeCluster."""

import pytest

from tests.support.interop_suite import InteropSuite


class TestConfluentKafka(InteropSuite):
    family_name = "confluent"

    @pytest.mark.timeout(60)
    def test_describe_cluster(self, client, shared_broker):
        d = client.describe_cluster(shared_broker.bootstrap)
        assert d["cluster_id"], "no cluster id"
        assert [(h, p) for _, h, p in d["nodes"]] == [(shared_broker.host, shared_broker.advertised_port)]
        assert d["controller"] in [n for n, _, _ in d["nodes"]] or d["controller"] == -1
