"""A KafkaTopic write gets time for its size: a near-limit object is not an "unreachable" API server."""

from broker.metadata.kube_store import REQUEST_TIMEOUT_S, topic_write_timeout


def test_small_objects_get_the_plain_timeout_and_large_ones_more():
    small = {"metadata": {"name": "t"}, "status": {"partitions": 1}}
    assert REQUEST_TIMEOUT_S <= topic_write_timeout(small) < REQUEST_TIMEOUT_S + 0.1
    large = {"metadata": {"name": "t"}, "status": {"assignment": ["x" * 1000] * 1500}}   # ~1.4 MiB
    assert topic_write_timeout(large) > 4 * REQUEST_TIMEOUT_S
