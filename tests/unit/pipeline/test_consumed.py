"""The raw offsets safe to delete: the minimum over queries of their last committed end offsets."""

from pipeline.consumed import ConsumedOffsets


def test_nothing_is_safe_until_every_query_reported():
    c = ConsumedOffsets(["dead-letters", "aggregates"])
    assert c.safe() == {}
    c.update("aggregates", {"events": {"0": 10, "1": 4}})
    assert c.safe() == {}
    c.update("dead-letters", {})  # a report without offsets changes nothing
    assert c.safe() == {}


def test_minimum_per_partition_over_queries():
    c = ConsumedOffsets(["dead-letters", "aggregates"])
    c.update("aggregates", {"events": {"0": 10, "1": 4}})
    c.update("dead-letters", {"events": {"0": 7, "1": 9}})
    assert c.safe() == {"events": {"0": 7, "1": 4}}
    c.update("dead-letters", {"events": {"0": 12, "1": 9}})
    assert c.safe() == {"events": {"0": 10, "1": 4}}


def test_a_partition_one_query_has_not_seen_is_not_safe():
    c = ConsumedOffsets(["a", "b"])
    c.update("a", {"events": {"0": 5, "2": 3}})
    c.update("b", {"events": {"0": 6}})
    assert c.safe() == {"events": {"0": 5}}


def test_open_catch_up_ranges_hold_the_offsets_back_until_forgotten():
    c = ConsumedOffsets(["dead-letters", "aggregates", "dead-letters catch-up"])
    c.update("aggregates", {"events": {"0": 10}})
    c.update("dead-letters", {"events": {"0": 30}})  # the stream restarted at the end
    c.update("dead-letters catch-up", {"events": {"0": 4}})  # the gap is processed up to 4
    assert c.safe() == {"events": {"0": 4}}
    c.forget("dead-letters catch-up")
    assert c.safe() == {"events": {"0": 10}}
