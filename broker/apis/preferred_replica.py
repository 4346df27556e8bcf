"""KIP-392 on a Fetch's path: the views of a led partition's replicas that the pure selector
(broker/replica/replica_selector.py) chooses from, as Kafka's ReplicaManager.findPreferredReadReplica
gathers them: each follower's log end, log start and time since it was last caught up from the
leader's replica state, in-sync from the ISR, its rack from its registration, and reachable when
it has an endpoint on the listener the consumer came in on. Followers outside the consumer's rack
are left out before the selector runs (no selector Flotilla serves would pick them), so a fetch of
many partitions whose leaders share the consumer's rack costs one registration lookup each."""

from __future__ import annotations

from broker.metadata import cluster_view
from broker.metadata.store import MetadataImage
from broker.replica.partition import Partition, _now_ms
from broker.replica.replica_selector import NO_REPLICA, FollowerView, ReplicaView, preferred_read_replica


def preferred_read_replica_of(part: Partition, image: MetadataImage, listener: str | None, selector: str,
                              client_rack: str | None, fetch_offset: int) -> int:
    """The preferred read replica for a consumer of `part` (led here) in `client_rack` fetching
    from `fetch_offset`, or -1: read from the leader."""
    state = part.replica_state
    if state is None or not selector or not client_rack:
        return NO_REPLICA
    leader_address = cluster_view.node_address(image, state.leader_id, listener)
    leader_rack = leader_address.rack if leader_address is not None else None
    if leader_rack == client_rack:
        return NO_REPLICA  # every selector keeps a client in the leader's rack on the leader: no views to build
    leader = ReplicaView(state.leader_id, leader_rack, part.log.log_end_offset, 0)
    now = _now_ms()
    followers = []
    for f in state.followers.values():
        address = cluster_view.node_address(image, f.broker_id, listener)
        if address is None or address.rack != client_rack:
            continue  # never chosen for this client (no selector sends it out of its rack): skipped early
        view = ReplicaView(f.broker_id, address.rack, f.log_end_offset, now - f.last_caught_up_time_ms)
        followers.append(FollowerView(view, f.broker_id in state.isr, f.log_start_offset))
    if not followers:
        return NO_REPLICA
    return preferred_read_replica(selector, client_rack, leader, followers, fetch_offset)
