"""Kafka's variable-length integers, written: unsigned (flexible versions' lengths and tag
counts) and zigzag-signed (the fields inside a record). Readers stay with their parsers, whose
errors differ (a malformed request vs. an unreadable batch)."""

from __future__ import annotations


def uvarint_bytes(n: int) -> bytes:
    """An unsigned varint (n >= 0)."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def varint_bytes(n: int) -> bytes:
    """A signed varint/varlong, zigzag-encoded as in Kafka's record format."""
    return uvarint_bytes((n << 1) ^ (n >> 63))
