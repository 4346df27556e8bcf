"""Feature ranges in ApiVersions by request version (KAFKA-17011)."""

from broker.apis.handlers import api_versions


def test_before_v4_a_range_from_zero_is_left_out(monkeypatch):
    monkeypatch.setattr(api_versions, "FEATURES", {"a": (0, 2, 1), "b": (0, 0, 0), "c": (1, 3, 3)})
    assert api_versions.supported_ranges(3) == [("c", 1, 3)]
    assert api_versions.supported_ranges(4) == [("a", 0, 2), ("b", 0, 0), ("c", 1, 3)]
    assert api_versions.supported_ranges(2) == []
    assert api_versions.finalized_levels(3) == api_versions.finalized_levels(4) == [("a", 1), ("c", 3)]
