from broker.protocol import codec
from broker.apis.handlers import all_handlers


def test_every_handler_serves_a_range_kio_has():
    keys = set()
    for h in all_handlers():
        kio_lo, kio_hi = codec.kio_versions(h.api_key)
        assert h.min_version <= h.max_version, h
        assert kio_lo <= h.max_version and h.min_version <= kio_hi, h
        assert h.api_key not in keys, f"two handlers for API key {h.api_key}"
        keys.add(h.api_key)
    # the APIs the broker-core issue lists
    assert {0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 18, 19, 20, 22, 32, 37, 42, 60} <= keys
