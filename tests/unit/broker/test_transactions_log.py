"""The partition side of transactions (KIP-98): ongoing transactions in producer state, COMMIT/ABORT
markers, the last stable offset, the aborted transaction index and what survives a restart."""

from __future__ import annotations

import struct

import pytest

from broker.log.log import CoordinatorFenced, Log, LogConfig, ProducerFenced
from broker.log.producer_state import ProducerStateManager
from broker.log.transaction_index import ENTRY_SIZE, AbortedTxn, TransactionIndex
from broker.protocol import control_records, records
from tests.unit.broker.batches import make_batch


def _append(lg: Log, values, pid=-1, epoch=-1, seq=-1, txn=False):
    payload = make_batch(values, producer_id=pid, epoch=epoch, base_sequence=seq, transactional=txn)
    result = lg.append(payload, records.validate_batches(payload, 1 << 20))
    lg.high_watermark = lg.log_end_offset  # a single replica: everything appended is replicated
    return result


def _open(path, **kw) -> Log:
    return Log.open(path, "t", 0, LogConfig(**kw))


def test_marker_batch_round_trip():
    batch = control_records.marker_batch(7, 3, False, 11, 1_700_000_000_000)
    [h] = records.validate_batches(batch, 1 << 20)
    assert h.is_control and h.is_transactional and h.producer_id == 7 and h.producer_epoch == 3
    assert h.base_sequence == -1 and h.records_count == 1
    marker = control_records.read_marker(batch, h)
    assert marker == control_records.Marker(commit=False, coordinator_epoch=11)
    assert control_records.read_marker(control_records.marker_batch(7, 3, True, 0, 0), h).commit


def test_ongoing_transaction_holds_the_lso_until_its_marker(tmp_path):
    lg = _open(tmp_path / "t-0")
    _append(lg, [b"a"])                                   # 0, not transactional
    _append(lg, [b"t1", b"t2"], pid=5, epoch=0, seq=0, txn=True)  # 1-2
    _append(lg, [b"b"])                                   # 3
    assert lg.high_watermark == 4
    assert lg.last_stable_offset == 1
    lg.append_marker(5, 0, commit=True, coordinator_epoch=0)  # 4
    assert lg.last_stable_offset == 1  # its marker is not replicated yet: still unstable
    lg.high_watermark = lg.log_end_offset
    assert lg.last_stable_offset == 5
    assert lg.aborted_transactions(0, 5) == []


def test_abort_writes_the_aborted_index_in_kafka_layout(tmp_path):
    lg = _open(tmp_path / "t-0")
    _append(lg, [b"x"], pid=5, epoch=0, seq=0, txn=True)  # 0
    _append(lg, [b"y"], pid=6, epoch=0, seq=0, txn=True)  # 1
    lg.append_marker(5, 0, commit=False, coordinator_epoch=2)  # 2
    lg.high_watermark = lg.log_end_offset
    assert lg.last_stable_offset == 1  # producer 6 still open
    [entry] = lg.aborted_transactions(0, 3)
    assert entry == AbortedTxn(5, 0, 2, 1)  # LSO after it: producer 6's first offset
    raw = (tmp_path / "t-0" / "00000000000000000000.txnindex").read_bytes()
    assert len(raw) == ENTRY_SIZE and struct.unpack(">hqqqq", raw) == (0, 5, 0, 2, 1)
    assert lg.aborted_transactions(3, 4) == []  # marker before the fetch offset: not overlapping


def test_fenced_markers(tmp_path):
    lg = _open(tmp_path / "t-0")
    _append(lg, [b"x"], pid=5, epoch=3, seq=0, txn=True)
    with pytest.raises(ProducerFenced):
        lg.append_marker(5, 2, commit=True, coordinator_epoch=0)
    lg.append_marker(5, 3, commit=True, coordinator_epoch=4)
    with pytest.raises(CoordinatorFenced):
        lg.append_marker(5, 3, commit=False, coordinator_epoch=3)
    assert lg.log_end_offset == 2  # nothing written by a refused marker


def test_restart_keeps_an_ongoing_transaction_and_the_aborted_index(tmp_path):
    d = tmp_path / "t-0"
    lg = _open(d, segment_bytes=200)
    _append(lg, [b"x" * 50], pid=5, epoch=0, seq=0, txn=True)  # 0
    lg.append_marker(5, 0, commit=False, coordinator_epoch=0)  # 1
    _append(lg, [b"y" * 50], pid=6, epoch=0, seq=0, txn=True)  # 2, still open
    _append(lg, [b"z" * 50])  # 3
    hw = lg.high_watermark = lg.log_end_offset
    lg.close()  # snapshot at the log end: the open transaction is in it
    lg = _open(d, segment_bytes=200)
    lg.high_watermark = hw
    assert lg.producer_state.ongoing == {6: 2}
    assert lg.last_stable_offset == 2
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in lg.aborted_transactions(0, 4)] == [(5, 0, 1)]
    lg.close()
    # Without snapshots or index files (a crash before any was written), both are rebuilt from the log.
    for p in list(d.glob("*.snapshot")) + list(d.glob("*.txnindex")):
        p.unlink()
    lg = _open(d, segment_bytes=200)
    lg.high_watermark = hw
    assert lg.producer_state.ongoing == {6: 2}
    assert [(t.producer_id, t.first_offset, t.last_offset) for t in lg.aborted_transactions(0, 4)] == [(5, 0, 1)]


def test_truncation_below_a_marker_reopens_its_transaction(tmp_path):
    lg = _open(tmp_path / "t-0")
    _append(lg, [b"x"], pid=5, epoch=0, seq=0, txn=True)  # 0
    lg.append_marker(5, 0, commit=False, coordinator_epoch=0)  # 1
    assert lg.aborted_transactions(0, 2)
    lg.truncate_to(1)
    assert lg.aborted_transactions(0, 2) == []
    assert lg.producer_state.ongoing == {5: 0}


def test_transaction_index_cuts_a_torn_tail(tmp_path):
    p = tmp_path / "00000000000000000000.txnindex"
    idx = TransactionIndex(p)
    idx.append(AbortedTxn(1, 0, 4, 5))
    with open(p, "ab") as f:
        f.write(b"\x00" * 10)
    again = TransactionIndex(p)
    assert again.entries == [AbortedTxn(1, 0, 4, 5)] and p.stat().st_size == ENTRY_SIZE
    with pytest.raises(ValueError):
        again.append(AbortedTxn(2, 1, 3, 4))


def test_producer_with_an_open_transaction_does_not_expire(tmp_path):
    psm = ProducerStateManager(tmp_path)
    h = records.read_header(make_batch([b"x"], producer_id=9, epoch=0, base_sequence=0, transactional=True))
    psm.record(h)
    assert psm.remove_expired(now_ms=h.max_timestamp + 10_000, expiration_ms=1) == 0
    assert psm.ongoing == {9: 0}


def test_only_the_first_transactional_batch_of_a_producer_epoch_needs_verification(tmp_path):
    from broker.apis.transaction_verification import needs_verification

    psm = ProducerStateManager(tmp_path)
    first = records.read_header(make_batch([b"x"], producer_id=9, epoch=0, base_sequence=0, transactional=True))
    plain = records.read_header(make_batch([b"x"], producer_id=9, epoch=0, base_sequence=0))
    assert needs_verification(psm, first) and not needs_verification(psm, plain)
    psm.record(first)
    assert not needs_verification(psm, first)  # the transaction is open here already
    newer = records.read_header(make_batch([b"x"], producer_id=9, epoch=1, base_sequence=0, transactional=True))
    assert needs_verification(psm, newer)
