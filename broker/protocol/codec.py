"""Request/response framing on top of kio's generated types. No I/O, no state.

kio supplies a dataclass per (API, version) and fast readers/writers; this module picks the
right ones (built once per key and version), parses request headers, and frames responses with
the header version Kafka prescribes (flexible versions carry tagged fields; ApiVersions
responses always use header v0 so any client can read them, see KIP-511).
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import load_payload_module
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from broker.protocol import request_bounds

API_VERSIONS_KEY = 18

_HEAD = struct.Struct(">hhih")
_INT32 = struct.Struct(">i")


class MalformedRequest(ValueError):
    """The frame cannot be parsed; the connection that sent it is closed."""


class UnsupportedVersion(ValueError):
    def __init__(self, api_key: int, api_version: int) -> None:
        super().__init__(f"unsupported version {api_version} of API key {api_key}")
        self.api_key = api_key
        self.api_version = api_version


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size: int  # bytes the header took, body starts there


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, f"unknown_{api_key}")


def kio_versions(api_key: int) -> tuple[int, int] | None:
    """Lowest and highest version kio has types for."""
    name = api_key_map.get(api_key)
    if name is None or name not in schema_name_map:
        return None
    versions = schema_name_map[name].keys()
    return min(versions), max(versions)


def _entity(api_key: int, version: int, kind: EntityType) -> type:
    name = api_key_map[api_key]
    path = schema_name_map[name][version][kind]
    module = load_payload_module(api_key, version, kind)
    return getattr(module, path.split(":", 1)[1])


@functools.cache
def request_type(api_key: int, version: int) -> type:
    return _entity(api_key, version, EntityType.request)


@functools.cache
def response_type(api_key: int, version: int) -> type:
    return _entity(api_key, version, EntityType.response)


@functools.cache
def response_module(api_key: int, version: int):
    return load_payload_module(api_key, version, EntityType.response)


@functools.cache
def _reader(api_key: int, version: int):
    return entity_reader(request_type(api_key, version))


@functools.cache
def _writer(api_key: int, version: int):
    return entity_writer(response_type(api_key, version))


@functools.cache
def is_flexible(api_key: int, version: int) -> bool:
    return bool(request_type(api_key, version).__flexible__)


def _read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise MalformedRequest("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise MalformedRequest("varint too long")


def parse_header(frame: bytes, supported: dict[int, tuple[int, int]]) -> RequestHeader:
    """Parse the request header. Raises MalformedRequest or UnsupportedVersion.

    `supported` maps api key -> (min, max) version the broker serves.
    """
    if len(frame) < _HEAD.size:
        raise MalformedRequest("frame shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HEAD.unpack_from(frame, 0)
    pos = _HEAD.size
    client_id = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise MalformedRequest("client id runs past the frame")
        try:
            client_id = frame[pos : pos + client_len].decode()
        except UnicodeDecodeError:
            raise MalformedRequest("client id is not UTF-8") from None
        pos += client_len
    elif client_len != -1:
        raise MalformedRequest("negative client id length")
    bounds = supported.get(api_key)
    if bounds is None or not bounds[0] <= api_version <= bounds[1]:
        raise UnsupportedVersion(api_key, api_version)
    if is_flexible(api_key, api_version):
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
        if pos > len(frame):
            raise MalformedRequest("tagged fields run past the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def parse_body(frame: bytes, header: RequestHeader) -> Any:
    """The request body as kio's dataclass. Lengths and nulls are checked against the frame first
    (request_bounds): kio's reader would pre-allocate whatever count the wire claims."""
    cls = request_type(header.api_key, header.api_version)
    try:
        frame = request_bounds.check(cls, frame, header.size)
    except request_bounds.InvalidRequest as e:
        raise MalformedRequest(f"invalid {api_name(header.api_key)} v{header.api_version} request: {e}") from None
    try:
        body, size = _reader(header.api_key, header.api_version)(frame, header.size)
    except BaseException as e:  # kio raises several types for short or invalid buffers (pyo3 panics too)
        if not isinstance(e, Exception) and type(e).__name__ != "PanicException":
            raise
        raise MalformedRequest(f"cannot parse {api_name(header.api_key)} v{header.api_version}: {e}") from None
    return body


def response_header_bytes(header: RequestHeader) -> bytes:
    flexible = header.api_key != API_VERSIONS_KEY and is_flexible(header.api_key, header.api_version)
    corr = _INT32.pack(header.correlation_id)
    return corr + b"\x00" if flexible else corr


def encode_body(api_key: int, version: int, body: Any) -> bytes:
    out = io.BytesIO()
    _writer(api_key, version)(out, body)
    return out.getvalue()


def frame_response(header: RequestHeader, body_bytes: bytes) -> bytes:
    head = response_header_bytes(header)
    return _INT32.pack(len(head) + len(body_bytes)) + head + body_bytes


def build(cls: type, **fields: Any) -> Any:
    """Construct a kio dataclass from `fields`, dropping those this version does not have.

    Handlers are written once for all versions of an API; each version's class knows which
    fields it carries.
    """
    names = _field_names(cls)
    return cls(**{k: v for k, v in fields.items() if k in names})


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)
