"""The generator's events are a pure function of (seed, index): valid ones parse back to their
fields, malformed ones are malformed in the way their kind says."""

import json

import pytest

from pipeline.catalog import BY_ID
from pipeline.events import MALFORMED_KINDS, GeneratorSettings, make_event, make_events


def test_same_seed_same_events_and_other_seed_other_events():
    s = GeneratorSettings(seed=3, malformed_every=5)
    assert make_events(s, 0, 50) == make_events(s, 0, 50)
    assert make_events(s, 10, 5) == make_events(s, 0, 15)[10:]
    assert make_events(GeneratorSettings(seed=4), 0, 50) != make_events(GeneratorSettings(seed=3), 0, 50)


def test_valid_events_carry_their_fields_and_bounded_disorder():
    s = GeneratorSettings(seed=1, step_ms=50, disorder_ms=3000)
    for e in make_events(s, 0, 500):
        body = json.loads(e.value)
        assert e.malformed is None
        assert e.key == body["user_id"].encode()
        assert body == {k: v for k, v in {
            "event_id": f"e-{e.index:06d}", "user_id": e.user_id, "type": e.type, "product_id": e.product_id,
            "quantity": e.quantity, "ts": e.ts}.items() if v is not None}
        assert e.product_id in BY_ID
        assert (e.quantity is not None and e.quantity > 0) == (e.type == "purchase")
        position = s.start_ms + e.index * s.step_ms
        assert position - s.disorder_ms <= e.ts <= position


def test_no_malformed_events_unless_asked():
    assert all(e.malformed is None for e in make_events(GeneratorSettings(malformed_every=0), 0, 300))


def test_malformed_kinds_are_malformed():
    events = [e for e in make_events(GeneratorSettings(seed=2, malformed_every=3), 0, 600) if e.malformed]
    assert {e.malformed for e in events} == set(MALFORMED_KINDS)
    for e in events:
        if e.malformed == "null-value":
            assert e.value is None
            continue
        if e.malformed == "not-utf8":
            with pytest.raises(UnicodeDecodeError):
                e.value.decode("utf-8")
            continue
        if e.malformed == "truncated-json":
            with pytest.raises(ValueError):
                json.loads(e.value)
            continue
        body = json.loads(e.value)
        if e.malformed == "missing-ts":
            assert "ts" not in body
        elif e.malformed == "unknown-type":
            assert body["type"] not in ("click", "purchase")
        elif e.malformed == "bad-quantity":
            assert body["type"] == "purchase" and body["quantity"] <= 0
        elif e.malformed == "unknown-product":
            assert body["product_id"] not in BY_ID
        elif e.malformed == "wrong-type":
            assert isinstance(body["ts"], str)


def test_malformed_rate_is_about_one_in_n():
    events = make_events(GeneratorSettings(seed=5, malformed_every=10), 0, 5000)
    share = sum(e.malformed is not None for e in events) / len(events)
    assert 0.07 < share < 0.13
