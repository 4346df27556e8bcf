"""Connections from the transaction coordinator's side to other brokers' inter-broker listeners.

The marker sender (WriteTxnMarkers to partition leaders) and the partition leader's KIP-890
verification (AddPartitionsToTxn verify_only to the coordinator) both keep one connection per
broker, found through the metadata image, and drop it when a request over it fails. `security`
(an InterBrokerClient) makes them TLS/SASL connections as the inter-broker listener asks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from broker.network.client import ClientError, KafkaConnection
from broker.metadata import cluster_view

if TYPE_CHECKING:
    from broker.metadata.store import MetadataStore

CONNECT_TIMEOUT_S = 5.0


class InterBrokerConnections:
    """One KafkaConnection per broker id, opened on first use to its `listener` endpoint."""

    def __init__(self, store: "MetadataStore", listener: str, client_id: str, security: Any = None) -> None:
        self.store, self.listener, self.client_id, self.security = store, listener, client_id, security
        self._conns: dict[int, KafkaConnection] = {}

    async def get(self, node_id: int) -> KafkaConnection:
        conn = self._conns.get(node_id)
        if conn is not None:
            return conn
        address = cluster_view.node_address(self.store.image, node_id, self.listener)
        if address is None:
            raise ClientError(f"broker {node_id} has no {self.listener} endpoint")
        conn = KafkaConnection(address.host, address.port, self.client_id, self.security)
        await conn.connect(CONNECT_TIMEOUT_S)
        self._conns[node_id] = conn
        return conn

    def drop(self, node_id: int) -> None:
        conn = self._conns.pop(node_id, None)
        if conn is not None:
            conn.close()

    def close(self) -> None:
        for node_id in list(self._conns):
            self.drop(node_id)
