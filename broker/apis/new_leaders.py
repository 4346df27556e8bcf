"""KIP-951: tell a client that sent Produce or Fetch to the wrong broker where the leader is.

Responses that carry NOT_LEADER_OR_FOLLOWER name the current leader and epoch of the partition
(`CurrentLeader`, tagged) and the endpoints of those leaders (`NodeEndpoints`, tagged), for the
listener the request came in on. This collects both while a handler builds its response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.controller.assignment import NO_LEADER
from broker.metadata.store import MetadataImage
from broker.metadata import cluster_view

if TYPE_CHECKING:
    from broker.apis.handlers.base import RequestContext


class NewLeaders:
    def __init__(self, ctx: "RequestContext", image: MetadataImage) -> None:
        self.ctx = ctx
        self.image = image
        self.listener = cluster_view.listener_of(ctx)
        self.nodes: dict[int, cluster_view.NodeAddress] = {}

    def leader_and_epoch(self, topic: str, partition: int) -> tuple[int, int]:
        state = cluster_view.partition_state(self.image, topic, partition)
        if state is None:
            return NO_LEADER, -1
        if state.leader != NO_LEADER and state.leader not in self.nodes:
            address = cluster_view.node_address(self.image, state.leader, self.listener)
            if address is not None:
                self.nodes[state.leader] = address
        return state.leader, state.leader_epoch

    def current_leader(self, topic: str, partition: int):
        leader, epoch = self.leader_and_epoch(topic, partition)
        return self.ctx.build("LeaderIdAndEpoch", leader_id=leader, leader_epoch=epoch)

    def node_endpoints(self) -> tuple:
        if not self.ctx.has("NodeEndpoint"):
            return ()
        return tuple(self.ctx.build("NodeEndpoint", node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
                     for _, n in sorted(self.nodes.items()))

    def explain(self, code: ErrorCode, topic: str, partition: int, state) -> str:
        if code == ErrorCode.not_leader_or_follower:
            leader = state.leader if state is not None else NO_LEADER
            return f"broker is not the leader of {topic}-{partition} (the leader is broker {leader})"
        if code == ErrorCode.leader_not_available:
            return f"{topic}-{partition} has no live leader right now"
        return f"unknown partition {topic}-{partition}"
