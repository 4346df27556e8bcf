"""What handlers ask the authorizer through: one object per connection, bound to its principal and
address, with the connection's answers cached until the ACLs change.

Handlers see it as `ctx.authz` (RequestContext); they never see the authorizer's index or the
broker. Without an authorizer (`authorizer.class.name` empty) it is ALLOW_ALL, which answers yes
at the cost of one attribute lookup. Each refused check counts once in
flotilla_authorization_denials_total{resource_type,operation} (both labels from Kafka's fixed enums).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from broker.security.acl import CLUSTER_NAME, SUPPORTED_OPERATIONS, AclOperation, ResourceType, operations_bits

if TYPE_CHECKING:
    from prometheus_client import Counter

    from broker.security.authorizer import StandardAuthorizer

CACHE_ENTRIES = 4096  # answers kept per connection; a connection asking about more starts over


class AllowAll:
    """No authorizer configured: everything is allowed (Kafka without authorizer.class.name)."""

    enabled = False

    def allowed(self, op: AclOperation, rt: ResourceType, name: str) -> bool:
        return True

    def cluster(self, op: AclOperation) -> bool:
        return True

    def allowed_any(self, op: AclOperation, rt: ResourceType) -> bool:
        return True

    def filter(self, op: AclOperation, rt: ResourceType, names: Iterable[str]) -> set[str]:
        return set(names)

    def quietly(self, op: AclOperation, rt: ResourceType, name: str) -> bool:
        return True

    def operations(self, rt: ResourceType, name: str) -> int:
        """The *_authorized_operations bit set of a resource (Kafka's AuthHelper.authorizedOperations):
        each operation its type supports that the principal may do there; asking is not a denial."""
        return operations_bits(op for op in SUPPORTED_OPERATIONS[rt] if self.quietly(op, rt, name))

    def cluster_operations(self) -> int:
        """The cluster's bit set as Metadata and DescribeCluster report it: 0 (and a denial) for a
        principal that may not DESCRIBE the cluster."""
        return self.operations(ResourceType.CLUSTER, CLUSTER_NAME) if self.cluster(AclOperation.DESCRIBE) else 0


ALLOW_ALL = AllowAll()


class AuthzSession(AllowAll):
    enabled = True

    def __init__(self, authorizer: "StandardAuthorizer", principal: str, host: str,
                 denials: "Counter | None" = None) -> None:
        self.authorizer = authorizer
        self.principal = principal
        self.host = host
        self._denials = denials
        self._version = -1
        self._cache: dict[tuple[AclOperation, ResourceType, str], bool] = {}

    def allowed(self, op: AclOperation, rt: ResourceType, name: str) -> bool:
        authorizer = self.authorizer
        if self._version != authorizer.version or len(self._cache) >= CACHE_ENTRIES:
            self._cache.clear()
            self._version = authorizer.version
        key = (op, rt, name)
        ok = self._cache.get(key)
        if ok is None:
            ok = self._cache[key] = authorizer.authorize(self.principal, self.host, op, rt, name)
        if not ok:
            self._denied(op, rt)
        return ok

    def cluster(self, op: AclOperation) -> bool:
        return self.allowed(op, ResourceType.CLUSTER, CLUSTER_NAME)

    def allowed_any(self, op: AclOperation, rt: ResourceType) -> bool:
        ok = self.authorizer.authorize_any(self.principal, self.host, op, rt)
        if not ok:
            self._denied(op, rt)
        return ok

    def filter(self, op: AclOperation, rt: ResourceType, names: Iterable[str]) -> set[str]:
        return {n for n in names if self.allowed(op, rt, n)}

    def quietly(self, op: AclOperation, rt: ResourceType, name: str) -> bool:
        """A check whose refusal is not a denial (Kafka's logIfDenied=false): filtering, and
        trying CLUSTER before the resource itself."""
        denials, self._denials = self._denials, None
        try:
            return self.allowed(op, rt, name)
        finally:
            self._denials = denials

    def _denied(self, op: AclOperation, rt: ResourceType) -> None:
        if self._denials is not None:
            self._denials.labels(rt.name, op.name).inc()


def peer_host(peer: str) -> str:
    """The address part of "host:port" (IPv6 addresses keep their colons), as ACL hosts name it."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return host.strip("[]")


def denials_counter(registry):
    """flotilla_authorization_denials_total{resource_type,operation}: refused authorization checks."""
    from prometheus_client import Counter

    return Counter("flotilla_authorization_denials", "Authorization checks the authorizer refused, by the "
                   "resource type and operation asked for", ["resource_type", "operation"], registry=registry)
