"""The Java client (kafka-clients, tests/java/client-check) against the broker.

Needs Java 17 and Maven; `scripts/setup.d/10-clients.sh` builds the client. A missing tool fails
these tests (it does not skip them).
"""

import pytest

from tests.support.interop_suite import InteropSuite

pytestmark = pytest.mark.java


class TestJavaClient(InteropSuite):
    family_name = "java"

    @pytest.mark.timeout(90)
    def test_describe_cluster(self, client, shared_broker):
        d = client.describe_cluster(shared_broker.bootstrap)
        assert d["cluster_id"], "no cluster id"
        assert [(h, p) for _, h, p in d["nodes"]] == [(shared_broker.host, shared_broker.advertised_port)]
        assert d["controller"] in [n for n, _, _ in d["nodes"]]
