"""What every API handler is: the versions it serves and one async method per request."""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from kio.schema.errors import ErrorCode

from broker.protocol import codec, error_response
from broker.protocol.codec import RequestHeader
from broker.security.authz_session import ALLOW_ALL

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.controller.controller import Controller
    from broker.coordinator.group.coordinator import GroupCoordinator
    from broker.coordinator.producer_ids import ProducerIdManager
    from broker.coordinator.transaction.coordinator import TransactionCoordinator
    from broker.coordinator.transaction.verification import TxnVerifier
    from broker.metadata.acls import AclStore
    from broker.metadata.broker_configs import BrokerConfigStore
    from broker.metadata.client_quotas import ClientQuotaStore
    from broker.metadata.store import MetadataStore
    from broker.network.connection import Connection, Dispatcher
    from broker.security.authorizer import StandardAuthorizer
    from broker.security.credentials import ScramCredentials
    from broker.security.scram_store import ScramCredentialStore
    from broker.apis.fetch_session import FetchSessionCache
    from broker.server.metrics import BrokerMetrics
    from broker.replica.purgatory import Purgatory
    from broker.quotas.quota_manager import QuotaManagers
    from broker.quotas.replication_quota import ReplicationQuotas
    from broker.replica.replica_manager import ReplicaManager
    from broker.admin.topics import TopicManager

NO_THROTTLE = datetime.timedelta(0)

class BrokerServices(Protocol):
    """What handlers use of the broker (broker/server/broker.py's Broker is the one), declared here
    so that nothing under handlers/ imports the module that wires them."""

    node_id: int
    config: "BrokerConfig"
    store: "MetadataStore"
    replicas: "ReplicaManager"
    topics: "TopicManager"
    controller: "Controller"
    groups: "GroupCoordinator"
    transactions: "TransactionCoordinator"
    txn_verifier: "TxnVerifier"
    producer_ids: "ProducerIdManager"
    fetch_sessions: "FetchSessionCache"
    fetch_purgatory: "Purgatory"
    delete_records_purgatory: "Purgatory"
    quotas: "QuotaManagers"
    replication_quotas: "ReplicationQuotas"
    broker_configs: "BrokerConfigStore"
    client_quotas: "ClientQuotaStore"
    acls: "AclStore | None"
    authorizer: "StandardAuthorizer | None"
    scram_store: "ScramCredentialStore"
    scram: "ScramCredentials"
    metrics: "BrokerMetrics"
    dispatcher: "Dispatcher"


class RequestRefused(Exception):
    """A handler refuses the whole request with one error code (Kafka: an ApiException thrown by
    KafkaApis); the dispatcher answers with `error_response`, without a traceback."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class RequestContext:
    """Everything a handler may want to know about the request besides its body."""

    header: RequestHeader
    connection: "Connection"
    request_size: int = 0  # bytes of the request frame (what a produce quota counts)
    # KIP-13 quotas: when handling started, time spent parked in a purgatory (not handler time),
    # the request-quota throttle once recorded, and the largest throttle any quota asked for.
    started_ns: int = field(default_factory=time.perf_counter_ns)
    waited_ns: int = 0
    request_quota_recorded: bool = False
    request_throttle_ms: int = 0
    throttle_ms: int = 0
    # The name of the connection's principal (`connection.principal`, broker/security/principal.py):
    # the SASL user, the mapped mTLS subject, or ANONYMOUS. Quotas' user entity is this name.
    user: str = "ANONYMOUS"
    # What the connection's principal may do (broker/security/authz_session.py): ALLOW_ALL
    # without an authorizer. Handlers check as Kafka's KafkaApis does, e.g.
    # `ctx.authz.allowed(AclOperation.READ, ResourceType.TOPIC, name)`.
    authz: Any = ALLOW_ALL

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

    def __init__(self, broker: BrokerServices) -> None:
        self.broker = broker

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        raise NotImplementedError

    def error_response(self, ctx: RequestContext, request: Any, code: ErrorCode, message: str) -> Any:
        """The answer when `handle` failed (Kafka's getErrorResponse); None sends nothing and closes.

        The default answers every requested entry that can carry an error code (error_response.py);
        APIs whose entries do not line up with the request's override this.
        """
        return error_response.error_body(self.api_key, ctx.api_version, code, message, request)


def require(ctx: RequestContext, op, resource_type, name: str, code: ErrorCode) -> None:
    """Refuse the whole request with `code` (an *_AUTHORIZATION_FAILED) unless the connection's
    principal may do `op` on the resource (Kafka: KafkaApis answering getErrorResponse)."""
    if not ctx.authz.allowed(op, resource_type, name):
        raise RequestRefused(code, f"{ctx.authz.principal} is not authorized to {op.name} "
                                   f"{resource_type.name} {name!r}")
