"""kcat (librdkafka's command-line client) against the broker.

kcat has no admin API and reports no offsets to its caller, so topic creation is by auto-create and
round trips are checked on the consumer side. A missing kcat fails these tests (it does not skip
them): `scripts/setup.d/10-clients.sh` installs it.
"""

import pytest

from flotilla.testenv import kafka_wire
from tests.support.interop_suite import InteropSuite, make_topic

pytestmark = pytest.mark.kcat


class TestKcat(InteropSuite):
    family_name = "kcat"

    @pytest.mark.timeout(60)
    def test_metadata_lists_broker_and_topics(self, client, shared_broker):
        topic = make_topic(shared_broker, 3, "kcat-L")
        md = client.metadata(shared_broker.bootstrap)
        assert [b["name"] for b in md["brokers"]] == [f"{shared_broker.host}:{shared_broker.advertised_port}"]
        topics = {t["topic"]: t for t in md["topics"]}
        assert topic in topics
        assert sorted(p["partition"] for p in topics[topic]["partitions"]) == [0, 1, 2]
        broker_id = md["brokers"][0]["id"]
        assert all(p["leader"] == broker_id for p in topics[topic]["partitions"])
        # The plain-text listing names the broker too.
        text = client.run("-b", shared_broker.bootstrap, "-L", "-m", "20").stdout
        assert f"{shared_broker.host}:{shared_broker.advertised_port}" in text and topic in text
        assert kafka_wire.unique_topic() not in text
