"""A response of any API and version that carries one error code: what a request gets when its
handler fails, in the shape its client reads (Kafka: AbstractRequest.getErrorResponse).

Error codes get `code`, also where the schema has a default (OffsetFetch's 0 would read as
success); every other field takes the schema's default where it has one, otherwise error
messages get `message`, ids and epochs -1 and other numbers 0. As Kafka's error responses
do, entries that carry an error code are answered per requested entry: the request's arrays are
walked beside the response's (topics, their partitions, group ids, resources), identifiers copied
(name, partition index, key, group id, ...) and every entry gets `code`. Handlers may still
answer in their own way (Handler.error_response).
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from broker.protocol import codec

_NO_UUID = uuid.UUID(int=0)


def _unwrap(tp) -> tuple[Any, bool]:
    if typing.get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        return args[0], len(args) < len(typing.get_args(tp))
    return tp, False


def _value(f: dataclasses.Field, code: ErrorCode, message: str | None) -> Any:
    if f.metadata.get("kafka_type") == "error_code":
        return code  # even where the schema defaults it to 0 (OffsetFetch v2+): the error must show
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    tp, nullable = _unwrap(f.type)
    kafka_type = f.metadata.get("kafka_type")
    if typing.get_origin(tp) is tuple:
        return ()
    if dataclasses.is_dataclass(tp):
        return None if nullable else fill(tp, code, message)
    if kafka_type == "string":
        if f.name == "error_message":
            return message
        return None if nullable else ""
    if kafka_type in ("bytes", "records"):
        return None if nullable else b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return _NO_UUID
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return None if nullable else datetime.datetime.fromtimestamp(0, datetime.timezone.utc)
    if f.name.endswith(("_id", "epoch", "offset", "port")) or f.name in ("leader", "node_id"):
        return -1
    return 0


def fill(cls: type, code: ErrorCode, message: str | None, request: Any = None) -> Any:
    """An instance of the kio class `cls` with every field defaulted as described above, and its
    error-carrying arrays mirrored from `request` (a kio request or request element) if given."""
    values = {f.name: _value(f, code, message) for f in dataclasses.fields(cls)}
    if request is not None:
        req_arrays = [getattr(request, f.name) for f in dataclasses.fields(type(request)) if _is_array(f)]
        resp_arrays = [f for f in dataclasses.fields(cls) if _entity_array(f) and _carries_error(_entity_array(f))]
        for f, items in zip(resp_arrays, req_arrays):
            element = _entity_array(f)
            values[f.name] = tuple(_element(element, item, code, message) for item in items or ())
        for f in dataclasses.fields(cls):
            if f.name in _IDENTIFIERS and not _is_array(f):
                for alias in _IDENTIFIERS[f.name]:
                    if hasattr(request, alias) and getattr(request, alias) is not None:
                        values[f.name] = getattr(request, alias)
                        break
    return cls(**values)


def error_body(api_key: int, version: int, code: ErrorCode = ErrorCode.unknown_server_error,
               message: str | None = None, request: Any = None) -> Any:
    try:
        return fill(codec.response_type(api_key, version), code, message, request)
    except Exception:  # a request too odd to mirror still gets the plain error response
        return fill(codec.response_type(api_key, version), code, message)


# response field -> request fields that hold the same identifier
_IDENTIFIERS = {
    "name": ("name", "topic"), "topic": ("topic", "name"), "topic_id": ("topic_id",),
    "partition_index": ("partition_index", "partition", "index"), "index": ("index", "partition_index", "partition"),
    "partition": ("partition", "partition_index", "index"), "key": ("key",), "group_id": ("group_id",),
    "resource_type": ("resource_type",), "resource_name": ("resource_name",), "member_id": ("member_id",),
    "group_instance_id": ("group_instance_id",),
}


def _is_array(f: dataclasses.Field) -> bool:
    return typing.get_origin(_unwrap(f.type)[0]) is tuple


def _entity_array(f: dataclasses.Field) -> type | None:
    tp = _unwrap(f.type)[0]
    if typing.get_origin(tp) is tuple and dataclasses.is_dataclass(typing.get_args(tp)[0]):
        return typing.get_args(tp)[0]
    return None


def _carries_error(cls: type) -> bool:
    return any(f.metadata.get("kafka_type") == "error_code" or
               (_entity_array(f) is not None and _carries_error(_entity_array(f))) for f in dataclasses.fields(cls))


def _element(cls: type, item: Any, code: ErrorCode, message: str | None) -> Any:
    """One response entry for one request entry: an entity is mirrored field by field; a plain
    value (a group id, a partition index) fills the first identifier field of its type."""
    if dataclasses.is_dataclass(item):
        return fill(cls, code, message, item)
    entry = fill(cls, code, message)
    want = "string" if isinstance(item, str) else "int"
    for f in dataclasses.fields(cls):
        if f.name in _IDENTIFIERS and f.metadata.get("kafka_type", "").startswith(want):
            return dataclasses.replace(entry, **{f.name: item})
    return entry
