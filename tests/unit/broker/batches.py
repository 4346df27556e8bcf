"""Builds real RecordBatch v2 bytes with kio's writer, as a client would send them."""

from __future__ import annotations

import datetime
import io

from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch


def make_batch(values: list[bytes], *, producer_id: int = -1, epoch: int = -1, base_sequence: int = -1,
               timestamp_ms: int = 1_700_000_000_000, keys: list[bytes | None] | None = None,
               transactional: bool = False) -> bytes:
    ts = datetime.datetime.fromtimestamp(timestamp_ms / 1000, tz=datetime.timezone.utc)
    records = tuple(
        Record(attributes=0, timestamp=ts + datetime.timedelta(milliseconds=i), offset=i,
               key=(keys[i] if keys else None), value=v, headers=())
        for i, v in enumerate(values))
    buf = io.BytesIO()
    write_new_batch(buf, NewRecordBatch(producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence,
                                        records=records, attributes=0x10 if transactional else 0))
    return buf.getvalue()
