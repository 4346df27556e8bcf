"""A response of any API and version that carries one error code: what a request gets when its
handler fails, in the shape its client reads (Kafka: AbstractRequest.getErrorResponse).

Every field takes the schema's default where it has one; otherwise error codes get `code`,
error messages `message`, arrays are empty, ids and epochs are -1 and other numbers 0. Handlers
whose responses have no top-level error code (Produce, Metadata, ...) may answer per entry
instead (Handler.error_response).
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
    if kafka_type == "error_code":
        return code
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


def fill(cls: type, code: ErrorCode, message: str | None) -> Any:
    """An instance of the kio class `cls` with every field defaulted as described above."""
    return cls(**{f.name: _value(f, code, message) for f in dataclasses.fields(cls)})


def error_body(api_key: int, version: int, code: ErrorCode = ErrorCode.unknown_server_error,
               message: str | None = None) -> Any:
    return fill(codec.response_type(api_key, version), code, message)
