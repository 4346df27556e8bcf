import pytest
import struct

from broker.protocol import records
from tests.unit.broker.batches import make_batch


def test_valid_batch_header_is_read_without_decoding_records():
    data = make_batch([b"a", b"bb", b"ccc"], producer_id=7, epoch=0, base_sequence=10)
    [h] = records.validate_batches(data, 1 << 20)
    assert h.records_count == 3 and h.last_offset_delta == 2
    assert h.producer_id == 7 and h.base_sequence == 10 and h.last_sequence == 12
    assert h.size == len(data)


def test_several_batches_in_one_payload():
    data = make_batch([b"a"]) + make_batch([b"b", b"c"])
    hs = records.validate_batches(data, 1 << 20)
    assert [h.records_count for h in hs] == [1, 2]


def test_bad_crc_is_corrupt():
    data = bytearray(make_batch([b"hello"]))
    data[-1] ^= 0xFF
    with pytest.raises(records.CorruptRecordError, match="CRC"):
        records.validate_batches(bytes(data), 1 << 20)


def test_truncated_batch_is_corrupt():
    data = make_batch([b"hello"])
    with pytest.raises(records.CorruptRecordError):
        records.validate_batches(data[:-3], 1 << 20)


def test_too_large():
    data = make_batch([b"x" * 1000])
    with pytest.raises(records.RecordTooLargeError, match="message.max.bytes"):
        records.validate_batches(data, 500)


def test_old_magic_rejected():
    data = bytearray(make_batch([b"x"]))
    data[records.MAGIC_OFFSET] = 1
    with pytest.raises(records.InvalidRecordError, match="magic"):
        records.validate_batches(bytes(data), 1 << 20)


def test_rebase_keeps_crc_valid():
    data = bytearray(make_batch([b"a", b"b"]))
    records.rebase(data, 0, 12345)
    records.set_leader_epoch(data, 0, 3)
    [h] = records.validate_batches(bytes(data), 1 << 20)
    assert h.base_offset == 12345 and h.partition_leader_epoch == 3 and h.last_offset == 12346


def test_iter_headers_stops_at_torn_tail():
    a, b = make_batch([b"a"]), make_batch([b"b"])
    buf = a + b[: len(b) // 2]
    assert [p for p, _ in records.iter_headers(buf)] == [0]
