"""Check a request body's lengths and nulls against the frame before kio's reader sees it.

kio's native reader sizes each array by the count read from the wire before reading an
element, so one count near 2**31 (or a compact varint near 2**35) makes it ask for tens of
gigabytes and the process aborts. Kafka's generated readers refuse any collection longer than
the bytes left in the frame, and a null where the schema has no null ("non-nullable field ...
was serialized as null"); this module does the same by walking the request schema that kio's
dataclasses carry (field types and `kafka_type` metadata), compiled once per (api, version).

The walk accepts exactly what kio's reader accepts, minus: lengths that run past the frame,
array counts larger than the bytes left, strings longer than Kafka's 32767, nulls where the
field is not nullable, and tagged fields whose size disagrees with their content. Tagged fields
kio does not know are cut out (Kafka ignores them; kio's reader would refuse the request). A refusal
raises InvalidRequest naming the field; the caller closes the connection, as Kafka does when a
request body cannot be parsed.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
import types
import typing
from typing import Callable

from kio.serial._introspect import get_field_tag  # the tag a field carries in flexible versions

from broker.protocol.varint import uvarint_bytes

Walk = Callable[[bytes, int, int, list], int]  # (frame, position, end, edits) -> position after the value

_I8 = struct.Struct(">b").unpack_from
_I16 = struct.Struct(">h").unpack_from
_I32 = struct.Struct(">i").unpack_from

MAX_STRING_LENGTH = 0x7FFF  # Kafka's limit for a string field
_FIXED = {"bool": 1, "int8": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
          "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8,
          "uuid": 16}


class InvalidRequest(ValueError):
    """The body is framed but does not fit its schema (Kafka: InvalidRequestException)."""


def _uvarint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read an unsigned varint of at most 5 bytes, as kio and Kafka do."""
    result = shift = 0
    for _ in range(5):
        if pos >= end:
            raise InvalidRequest("varint runs past the frame")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise InvalidRequest("varint longer than 5 bytes")


# -- one walker per field kind --------------------------------------------------------------------


def _fixed(size: int) -> Walk:
    def walk(buf: bytes, pos: int, end: int, edits: list) -> int:
        pos += size
        if pos > end:
            raise InvalidRequest(f"{size}-byte field runs past the frame")
        return pos
    return walk


def _sized(name: str, flexible: bool, nullable: bool, is_string: bool) -> Walk:
    """A string, bytes or records field: a length (or null), then that many bytes."""
    limit = MAX_STRING_LENGTH if is_string else 2**31 - 1

    def walk(buf: bytes, pos: int, end: int, edits: list) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        elif is_string:
            if pos + 2 > end:
                raise InvalidRequest(f"{name}: length runs past the frame")
            (n,) = _I16(buf, pos)
            pos += 2
        else:
            if pos + 4 > end:
                raise InvalidRequest(f"{name}: length runs past the frame")
            (n,) = _I32(buf, pos)
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise InvalidRequest(f"non-nullable field {name} was serialized as null" if n == -1
                                 else f"{name} has negative length {n}")
        if n > limit or pos + n > end:
            raise InvalidRequest(f"{name} claims {n} bytes but {end - pos} remain in the frame")
        return pos + n
    return walk


def _array(name: str, flexible: bool, nullable: bool, element: Walk, element_size: int | None) -> Walk:
    """A count (or null), then that many elements; `element_size` when every element is fixed."""

    def walk(buf: bytes, pos: int, end: int, edits: list) -> int:
        if flexible:
            n, pos = _uvarint(buf, pos, end)
            n -= 1
        else:
            if pos + 4 > end:
                raise InvalidRequest(f"{name}: length runs past the frame")
            (n,) = _I32(buf, pos)
            pos += 4
        if n < 0:
            if n == -1 and nullable:
                return pos
            raise InvalidRequest(f"non-nullable field {name} was serialized as null" if n == -1
                                 else f"{name} has negative length {n}")
        if n > end - pos:  # every element takes at least one byte
            raise InvalidRequest(f"{name} claims {n} elements but {end - pos} bytes remain in the frame")
        if element_size is not None:
            pos += n * element_size
            if pos > end:
                raise InvalidRequest(f"{name}: {n} elements of {element_size} bytes run past the frame")
            return pos
        for _ in range(n):
            pos = element(buf, pos, end, edits)
        return pos
    return walk


def _nullable_struct(inner: Walk) -> Walk:
    """kio reads a nullable struct as an int8 marker (-1 for null) and then the struct."""

    def walk(buf: bytes, pos: int, end: int, edits: list) -> int:
        if pos >= end:
            raise InvalidRequest("struct marker runs past the frame")
        (marker,) = _I8(buf, pos)
        return pos + 1 if marker == -1 else inner(buf, pos + 1, end, edits)
    return walk


# -- compiling an entity ---------------------------------------------------------------------------


def _unwrap_optional(tp) -> tuple[object, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def _field_walk(owner: str, f: dataclasses.Field, flexible: bool, tagged: bool) -> tuple[Walk, int | None]:
    """(walker, fixed size or None) for one field, read the way kio's reader reads it."""
    name = f"{owner}.{f.name}"
    tp, optional = _unwrap_optional(f.type)
    if typing.get_origin(tp) is tuple:
        element_type = typing.get_args(tp)[0]
        if dataclasses.is_dataclass(element_type):
            elem, elem_size = _entity(element_type)
        else:
            elem, elem_size = _primitive(f"{name}[]", f.metadata["kafka_type"], flexible, nullable=False)
        return _array(name, flexible, optional, elem, elem_size), None
    if dataclasses.is_dataclass(tp):
        inner, size = _entity(tp)
        return (_nullable_struct(inner), None) if optional else (inner, size)
    return _primitive(name, f.metadata["kafka_type"], flexible, nullable=optional and not tagged)


def _primitive(name: str, kafka_type: str, flexible: bool, nullable: bool) -> tuple[Walk, int | None]:
    if kafka_type in _FIXED:
        size = _FIXED[kafka_type]
        return _fixed(size), size
    if kafka_type in ("string", "bytes", "records"):
        return _sized(name, flexible, nullable, kafka_type == "string"), None
    raise TypeError(f"{name}: no length rule for kafka type {kafka_type!r}")


@functools.cache
def _entity(cls: type) -> tuple[Walk, int | None]:
    """The walker of one kio dataclass, and its size when it has no variable-length part."""
    flexible = bool(cls.__flexible__)
    steps: list[Walk] = []
    run = 0  # consecutive fixed-size fields are skipped in one step
    total: int | None = 0
    tagged: dict[int, Walk] = {}
    for f in dataclasses.fields(cls):
        tag = get_field_tag(f)
        walk, size = _field_walk(cls.__name__, f, flexible, tagged=tag is not None)
        if tag is not None:
            tagged[int(tag)] = walk
            continue
        if size is not None:
            run += size
            if total is not None:
                total += size
            continue
        total = None
        if run:
            steps.append(_fixed(run))
            run = 0
        steps.append(walk)
    if run:
        steps.append(_fixed(run))
    if flexible:
        steps.append(_tagged_fields(cls.__name__, tagged))
        total = None
    if total is not None and len(steps) == 1:
        return steps[0], total
    steps_t = tuple(steps)

    def walk(buf: bytes, pos: int, end: int, edits: list) -> int:
        for step in steps_t:
            pos = step(buf, pos, end, edits)
        return pos
    return walk, total


def _tagged_fields(owner: str, known: dict[int, Walk]) -> Walk:
    """A count, then (tag, size, value) each; a known tag's value must fill its size exactly.

    Kafka keeps tags it does not know as unknown tagged fields and ignores them; kio's reader
    refuses them, so they are noted in `edits` to be cut out of the frame before kio reads it."""

    def walk(buf: bytes, pos: int, end: int, edits: list) -> int:
        count_at = pos
        count, pos = _uvarint(buf, pos, end)
        count_end = pos
        unknown: list[tuple[int, int, bytes]] = []
        for _ in range(count):
            field_at = pos
            tag, pos = _uvarint(buf, pos, end)
            size, pos = _uvarint(buf, pos, end)
            stop = pos + size
            if stop > end:
                raise InvalidRequest(f"{owner}: tagged field {tag} claims {size} bytes but {end - pos} remain")
            value = known.get(tag)
            if value is None:
                unknown.append((field_at, stop, b""))
            else:
                inner: list = []
                if value(buf, pos, stop, inner) != stop:
                    raise InvalidRequest(f"{owner}: tagged field {tag} does not fill its {size} bytes")
                if inner:
                    raise InvalidRequest(f"{owner}: tagged field {tag} holds tagged fields this broker does not know")
            pos = stop
        if unknown:
            edits.append((count_at, count_end, uvarint_bytes(count - len(unknown))))
            edits.extend(unknown)
        return pos
    return walk


def check(request_type: type, frame: bytes, start: int) -> bytes:
    """Raise InvalidRequest unless the body at frame[start:] is safe to hand to kio's reader.

    Returns the frame to read: `frame` itself, or a copy without the tagged fields kio does not
    know (ignored, as Kafka ignores them)."""
    edits: list[tuple[int, int, bytes]] = []
    _entity(request_type)[0](frame, start, len(frame), edits)
    if not edits:
        return frame
    parts, at = [], 0
    for begin, stop, replacement in edits:  # in frame order, never overlapping
        parts += (frame[at:begin], replacement)
        at = stop
    parts.append(frame[at:])
    return b"".join(parts)
