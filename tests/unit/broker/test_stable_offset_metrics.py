"""flotilla_partition_lso_lag_offsets: high watermark - LSO of partitions led here with an open
transaction, only the largest ones (bounded labels), read from real logs through a registry."""

from __future__ import annotations

import types

from prometheus_client import CollectorRegistry

from broker.log.log import Log, LogConfig
from broker.protocol import records
from broker.replica.stable_offset_metrics import StableOffsetCollector
from tests.unit.broker.batches import make_batch
from tests.unit.broker.test_monitoring_metrics import samples


def partition(tmp_path, name: str, committed: int, open_txn: int, led: bool = True):
    """A log with `committed` plain records, then an open transaction of `open_txn` records."""
    lg = Log.open(tmp_path / f"{name}-0", name, 0, LogConfig())
    for i in range(committed):
        data = make_batch([b"c%d" % i])
        lg.append(data, records.validate_batches(data, 1 << 20))
    if open_txn:
        data = make_batch([b"t%d" % i for i in range(open_txn)], producer_id=7, epoch=0, base_sequence=0,
                          transactional=True)
        lg.append(data, records.validate_batches(data, 1 << 20))
    lg.high_watermark = lg.log_end_offset
    return lg, types.SimpleNamespace(log=lg, replica_state=object() if led else None)


def lag_series(registry) -> dict[tuple, float]:
    return {dict(labels)["topic"]: v for (name, labels), v in samples(registry).items()
            if name == "flotilla_partition_lso_lag_offsets"}


def test_only_the_largest_lags_of_partitions_with_an_open_transaction_get_a_series(tmp_path):
    parts = {}
    for name, committed, open_txn, led in [("quiet", 5, 0, True), ("small", 1, 2, True), ("big", 0, 9, True),
                                           ("mid", 3, 4, True), ("follower", 0, 50, False)]:
        _, parts[(name, 0)] = partition(tmp_path, name, committed, open_txn, led)
    registry = CollectorRegistry()
    registry.register(StableOffsetCollector(types.SimpleNamespace(partitions=parts), max_partitions=2))
    # lag = records of the open transaction (the LSO is its first offset); a follower's is not ours to report
    assert lag_series(registry) == {"big": 9, "mid": 4}
    assert samples(registry)[("flotilla_partitions_with_open_transactions", ())] == 3


def test_a_decided_transaction_leaves_no_lag(tmp_path):
    lg, part = partition(tmp_path, "t", 2, 3)
    registry = CollectorRegistry()
    registry.register(StableOffsetCollector(types.SimpleNamespace(partitions={("t", 0): part}), max_partitions=20))
    assert lag_series(registry) == {"t": 3}
    lg.append_marker(7, 0, commit=True, coordinator_epoch=0)
    lg.high_watermark = lg.log_end_offset
    assert lag_series(registry) == {}
    assert samples(registry)[("flotilla_partitions_with_open_transactions", ())] == 0
