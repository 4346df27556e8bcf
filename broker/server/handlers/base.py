"""What every API handler is: the versions it serves and one async method per request."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from broker.protocol import codec
from broker.protocol.codec import RequestHeader

if TYPE_CHECKING:
    from broker.network.connection import Connection
    from broker.server.broker import Broker

NO_THROTTLE = datetime.timedelta(0)


@dataclass
class RequestContext:
    """Everything a handler may want to know about the request besides its body."""

    header: RequestHeader
    connection: "Connection"

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str:
        return self.header.client_id or ""

    @property
    def response(self):
        """The kio response module of this request's API and version (its classes build the answer)."""
        return codec.response_module(self.header.api_key, self.header.api_version)

    def has(self, class_name: str) -> bool:
        """Whether this version of the response has a class of that name (fields come and go)."""
        return hasattr(self.response, class_name)

    def build(self, class_name: str, **fields: Any) -> Any:
        """An instance of the response class `class_name` for this version, extra fields dropped."""
        return codec.build(getattr(self.response, class_name), **fields)


class Handler:
    """Base of one-API handlers. Subclasses set api_key/min_version/max_version and `handle`."""

    api_key: ClassVar[int]
    min_version: ClassVar[int]
    max_version: ClassVar[int]

    def __init__(self, broker: "Broker") -> None:
        self.broker = broker

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        raise NotImplementedError
