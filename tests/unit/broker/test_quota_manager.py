"""ClientQuotaManager: Kafka's entity precedence, shared and separate sensors, throttle times,
bounded metric labels, and the file store of dynamic quotas."""

import asyncio

import pytest

from broker.metadata.client_quotas import (FileClientQuotaStore, InvalidQuota, QuotaEntity, apply_changes,
                                           validate_value)
from broker.quotas.quota_manager import (ClientQuotaManager, ClientRequestQuotaManager, QuotaConfig, QuotaType,
                                         precedence, resolve)

E = QuotaEntity.user_client
KEY = "producer_byte_rate"


def test_the_eight_entities_in_kafkas_order():
    order = [e for e, _ in precedence("alice", "app")]
    assert order == [E("alice", "app"), E("alice", None), E("alice"), E(None, "app"), E(None, None), E(None),
                     E(client_id="app"), E(client_id=None)]


@pytest.mark.parametrize("configured, expected_entity, expected_tags", [
    ([E(client_id=None)], E(client_id=None), ("", "app")),
    ([E(client_id=None), E(client_id="app")], E(client_id="app"), ("", "app")),
    ([E(client_id="app"), E(None)], E(None), ("alice", "")),
    ([E(None), E(None, None)], E(None, None), ("alice", "app")),
    ([E(None, None), E(None, "app")], E(None, "app"), ("alice", "app")),
    ([E(None, "app"), E("alice")], E("alice"), ("alice", "")),
    ([E("alice"), E("alice", None)], E("alice", None), ("alice", "app")),
    ([E("alice", None), E("alice", "app")], E("alice", "app"), ("alice", "app")),
    ([E(client_id="other")], None, ("", "")),
])
def test_highest_precedence_entity_wins(configured, expected_entity, expected_tags):
    quotas = {e: {KEY: 100.0 + i} for i, e in enumerate(configured)}
    entity, tags, bound = resolve(quotas, KEY, "alice", "app")
    assert entity == expected_entity
    assert tags == expected_tags
    assert bound == (None if entity is None else quotas[entity][KEY])


def test_quota_types_resolve_independently():
    quotas = {E(client_id="app"): {"consumer_byte_rate": 5.0}, E(client_id=None): {KEY: 7.0}}
    assert resolve(quotas, KEY, "ANONYMOUS", "app")[2] == 7.0
    assert resolve(quotas, "consumer_byte_rate", "ANONYMOUS", "app")[2] == 5.0


def manager(dynamic=None, **cfg):
    m = ClientQuotaManager(QuotaType.PRODUCE, QuotaConfig(**cfg), clock=lambda: 0)
    m.update_quotas(dynamic or {})
    return m


def test_default_client_quota_gives_each_client_id_its_own_rate():
    m = manager({E(client_id=None): {KEY: 1000.0}})
    assert m.record_and_get_throttle_ms("ANONYMOUS", "a", 15_000, now_ms=0) == 5000  # (1500-1000)/1000*10000
    assert m.record_and_get_throttle_ms("ANONYMOUS", "b", 5_000, now_ms=0) == 0      # b has its own 1000 B/s


def test_user_quota_is_shared_by_its_client_ids():
    m = manager({E("ANONYMOUS"): {KEY: 1000.0}})
    assert m.record_and_get_throttle_ms("ANONYMOUS", "a", 8_000, now_ms=0) == 0
    assert m.record_and_get_throttle_ms("ANONYMOUS", "b", 7_000, now_ms=0) == 5000  # 15000 shared


def test_static_default_applies_until_a_dynamic_quota_overrides_it():
    m = manager(producer_default=1000.0)
    assert m.record_and_get_throttle_ms("ANONYMOUS", "a", 15_000, now_ms=0) == 5000
    m.update_quotas({E(client_id="a"): {KEY: 3000.0}})
    # the recorded rate stays (1500 B/s); the bound changes under it
    assert m.record_and_get_throttle_ms("ANONYMOUS", "a", 0, now_ms=0) == 0
    m.update_quotas({E(client_id=None): {KEY: 500.0}})
    assert m.record_and_get_throttle_ms("ANONYMOUS", "a", 0, now_ms=0) == 20_000


def test_no_quota_means_no_throttle_and_no_sensor():
    m = manager()
    assert not m.enabled
    assert m.record_and_get_throttle_ms("ANONYMOUS", "a", 10**9, now_ms=0) == 0
    assert m.sensors == {}


def test_request_quota_in_percent_and_bounded_by_a_window():
    m = ClientRequestQuotaManager(QuotaConfig(), clock=lambda: 0)
    m.update_quotas({E(client_id=None): {"request_percentage": 10.0}})
    # 0.5 s of handler time at t=0: 50 units over a 10 s window = 5 % -> fine
    assert m.record_nanos_and_get_throttle_ms("ANONYMOUS", "a", 500_000_000, now_ms=0) == 0
    # 2 s more: 250 units / 10 s = 25 % -> (25-10)/10*10000 = 15000 ms, bounded to one window
    assert m.record_nanos_and_get_throttle_ms("ANONYMOUS", "a", 2_000_000_000, now_ms=0) == 1000


def test_metric_labels_are_bounded():
    quotas = {E(client_id=f"c{i}"): {KEY: 10.0} for i in range(5)}
    quotas[E(client_id=None)] = {KEY: 10.0}
    m = manager(quotas, metrics_max_client_ids=3)
    for i in range(5):
        m.record_and_get_throttle_ms("ANONYMOUS", f"c{i}", 1, now_ms=0)
    for i in range(100):
        m.record_and_get_throttle_ms("ANONYMOUS", f"anon{i}", 1, now_ms=0)
    labels = {s.label for s in m.sensors.values()}
    assert labels == {("", "c0"), ("", "c1"), ("", "c2"), ("", "<other>"), ("", "<default>")}


def test_validation_of_values_and_entities():
    validate_value("producer_byte_rate", 1024)
    validate_value("request_percentage", 12.5)
    for key, value in [("producer_byte_rate", 0), ("consumer_byte_rate", -1), ("producer_byte_rate", 1.5),
                       ("nope", 1), ("request_percentage", float("nan"))]:
        with pytest.raises(InvalidQuota):
            validate_value(key, value)
    with pytest.raises(InvalidQuota, match="ip"):
        QuotaEntity.of([("ip", "1.2.3.4")]).validate()
    with pytest.raises(InvalidQuota, match="twice"):
        QuotaEntity.of([("user", "a"), ("user", "b")])


def test_file_store_applies_removes_and_survives_reopen(tmp_path):
    store = FileClientQuotaStore(tmp_path)
    seen = []
    store.subscribe(lambda q: seen.append(dict(q)))
    asyncio.run(store.alter(E(client_id="app"), {KEY: 1000.0, "consumer_byte_rate": 2000.0}))
    asyncio.run(store.alter(E(client_id=None), {KEY: 10.0}))
    asyncio.run(store.alter(E(client_id="app"), {KEY: None}))
    assert dict(store.quotas[E(client_id="app")]) == {"consumer_byte_rate": 2000.0}
    asyncio.run(store.alter(E(client_id="app"), {"consumer_byte_rate": None}))
    assert E(client_id="app") not in store.quotas   # no values left: the entity is gone
    assert len(seen) == 4
    again = FileClientQuotaStore(tmp_path)
    assert {e: dict(v) for e, v in again.quotas.items()} == {E(client_id=None): {KEY: 10.0}}
    assert apply_changes({}, E("u"), {KEY: None}) == {}
