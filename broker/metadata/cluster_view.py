"""The cluster as one broker answers it: live brokers' endpoints for a listener, partition
leaders, and the controller, all read from the metadata image (no I/O, cheap per request)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from broker.metadata.store import MetadataImage, PartitionState

NO_NODE = -1


class Request(Protocol):
    """What `listener_of` reads of a request (handlers' RequestContext): its connection. Declared
    here so this module, which coordinators and fetchers use too, needs nothing from the handlers."""

    connection: object


@dataclass(frozen=True)
class NodeAddress:
    node_id: int
    host: str
    port: int
    rack: str | None


def listener_of(ctx: Request) -> str | None:
    """The listener name the request came in on (brokers are advertised per listener)."""
    return getattr(ctx.connection, "listener_name", None)


def live_nodes(image: MetadataImage, listener: str | None) -> list[NodeAddress]:
    """Every live broker with an endpoint on `listener` (Kafka leaves out brokers without one),
    ordered by node id."""
    out = []
    for node_id in sorted(image.brokers):
        address = node_address(image, node_id, listener)
        if address is not None:
            out.append(address)
    return out


def node_address(image: MetadataImage, node_id: int, listener: str | None) -> NodeAddress | None:
    reg = image.brokers.get(node_id)
    if reg is None or not reg.endpoints:
        return None
    chosen = None
    for ep in reg.endpoints:
        if ep.listener == listener:
            chosen = ep
            break
    if chosen is None:
        if listener is not None and len(reg.endpoints) > 1:
            return None
        chosen = reg.endpoints[0]
    return NodeAddress(node_id, chosen.host, chosen.port, reg.rack)


def controller_id(image: MetadataImage) -> int:
    return image.controller_id if image.controller_id is not None else NO_NODE


def partition_state(image: MetadataImage, topic: str, partition: int) -> PartitionState | None:
    record = image.topics.get(topic)
    if record is None or record.assignment is None or not 0 <= partition < len(record.assignment):
        return None
    return record.assignment[partition]
