"""__transaction_state records in Kafka's TransactionLog layout (codec.py)."""

from __future__ import annotations

import struct

import pytest

from broker.coordinator.transaction import codec
from broker.coordinator.transaction.state import Transit, TxnState


def transit(state: TxnState, partitions=frozenset()) -> Transit:
    return Transit(producer_id=1000, last_producer_id=-1, producer_epoch=3, last_producer_epoch=-1,
                   timeout_ms=60000, state=state, partitions=frozenset(partitions), start_ms=111, last_update_ms=222)


def test_key_layout() -> None:
    assert codec.encode_key("tx") == b"\x00\x00\x00\x02tx"
    assert codec.decode_key(b"\x00\x00\x00\x02tx") == "tx"


def test_value_v0_layout_as_kafka_writes_it() -> None:
    got = codec.encode_value(transit(TxnState.ONGOING, {("a", 1), ("a", 0)}))
    want = (struct.pack(">hqhib", 0, 1000, 3, 60000, 1) + struct.pack(">i", 1) + b"\x00\x01a"
            + struct.pack(">iii", 2, 0, 1) + struct.pack(">qq", 222, 111))
    assert got == want


def test_empty_writes_a_null_partition_list() -> None:
    got = codec.encode_value(transit(TxnState.EMPTY))
    assert got[2 + 8 + 2 + 4 + 1:][:4] == b"\xff\xff\xff\xff"
    assert codec.decode_value(got).partitions == frozenset()


@pytest.mark.parametrize("state", list(TxnState))
def test_round_trip(state: TxnState) -> None:
    t = transit(state, {("x", 0), ("y", 5)} if state != TxnState.EMPTY else ())
    assert codec.decode_value(codec.encode_value(t)) == t


def test_flexible_v1_is_read() -> None:
    body = (struct.pack(">hqhib", 1, 1000, 3, 60000, 1) + b"\x02" + b"\x02a" + b"\x02" + struct.pack(">i", 4)
            + b"\x00" + struct.pack(">qq", 222, 111) + b"\x01\x00\x08" + struct.pack(">q", 900))
    t = codec.decode_value(body)
    assert (t.state, t.partitions, t.last_producer_id, t.start_ms) == (TxnState.ONGOING, {("a", 4)}, 900, 111)


@pytest.mark.parametrize("bad", [b"", b"\x00\x05", struct.pack(">hqhib", 0, 1, 0, 1, 42) + b"\xff\xff\xff\xff" + bytes(16),
                                 codec.encode_value(transit(TxnState.EMPTY)) + b"x"])
def test_unreadable_values_raise(bad: bytes) -> None:
    with pytest.raises(codec.CodecError):
        codec.decode_value(bad)


def test_partition_for_is_kafkas_hash() -> None:
    # Kafka: Utils.abs("my-txn".hashCode()) % 50
    h = 0
    for ch in "my-txn":
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    assert codec.partition_for("my-txn", 50) == abs(h) % 50
