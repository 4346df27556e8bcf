"""Compressing record bodies with a batch's codec, as Kafka's broker does when it rewrites one
(the log cleaner dropping records from a compressed batch). Decompression lives with the record
reader (`batch_records`); this is its inverse, in the framings Kafka's own writers produce."""

from __future__ import annotations

import struct

import cramjam

from broker.protocol import batch_records
from broker.protocol.batch_records import GZIP, LZ4, NO_COMPRESSION, SNAPPY, ZSTD

_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def compress(codec: int, data: bytes) -> bytes:
    """`data` compressed with `codec` (batch attribute bits 0-2). Snappy uses snappy-java's
    xerial framing, which the Java broker writes and every client reads; LZ4 the frame format."""
    if codec == NO_COMPRESSION:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        out = bytearray(_XERIAL_HEADER)
        for i in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[i:i + _XERIAL_BLOCK]))
            out += struct.pack(">i", len(block)) + block
        return bytes(out)
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise batch_records.BatchDecodeError(f"unknown compression codec {codec}")

