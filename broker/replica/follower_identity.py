"""Who may fetch as a follower (KIP-903): a live broker of this cluster, in its current
incarnation, over the inter-broker listener.

A follower's fetch moves the leader's high watermark and may add the follower to the ISR, so the
leader must not take `replica_id` on trust. Kafka checks the fetch's broker epoch (Fetch v15+
`ReplicaState.ReplicaEpoch`) against the follower's live registration; here the broker epoch is
derived from the registration's incarnation (the holder of the broker's Lease, a random id per
process), which only the broker itself and the metadata store know: a restarted broker has a new
one, and no client can guess it. Whether the broker is a replica of each partition is the
partition's check (`ReplicaManager.follower_fetched`). Refused fetches answer Kafka's error for a
follower it cannot recognise, NOT_LEADER_OR_FOLLOWER, per partition.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from broker.metadata.store import BrokerRegistration, MetadataImage

if TYPE_CHECKING:
    from broker.config import BrokerConfig

NO_EPOCH = -1  # Kafka: a fetch without a broker epoch (before v15, or a broker that has none)


def broker_epoch(reg: BrokerRegistration) -> int:
    """The broker epoch of a registration: 63 bits of a hash of its incarnation (non-negative, as
    Kafka's, which is the offset of the registration record in the metadata log)."""
    digest = hashlib.blake2b(reg.incarnation.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def own_broker_epoch(image: MetadataImage, node_id: int) -> int:
    """This broker's epoch as its registration in `image` gives it; NO_EPOCH until registered."""
    reg = image.brokers.get(node_id)
    return broker_epoch(reg) if reg is not None else NO_EPOCH


def inter_broker_listener(config: "BrokerConfig") -> str:
    """The listener brokers reach each other on, as broker/config.py resolved it (Kafka's rules)."""
    from broker.config import INTER_BROKER_LISTENER

    return config[INTER_BROKER_LISTENER]


def refusal(image: MetadataImage, replica_id: int, replica_epoch: int, listener: str | None,
            inter_listener: str) -> str | None:
    """Why a fetch claiming to come from broker `replica_id` is not accepted as a follower's
    (None: it is). `listener` is the one the request came in on (None: unknown, not checked)."""
    if listener is not None and listener != inter_listener:
        return f"follower fetches are accepted on the inter-broker listener {inter_listener} only, not on {listener}"
    reg = image.brokers.get(replica_id)
    if reg is None:
        return f"broker {replica_id} has no live registration in this cluster"
    if replica_epoch == NO_EPOCH:
        return f"no broker epoch (Fetch v15+ ReplicaState.replica_epoch) for broker {replica_id}"
    if replica_epoch != broker_epoch(reg):
        return f"broker epoch {replica_epoch} is not that of broker {replica_id}'s live registration"
    return None
