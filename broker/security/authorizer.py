"""Kafka's StandardAuthorizer: may this principal, from this host, do this operation on this resource?

The rules, as Kafka 4.1 applies them:
- a principal named in `super.users` may do everything;
- the ACLs that apply to a resource are those on its LITERAL name, on the LITERAL wildcard `*`
  and on every PREFIXED pattern its name starts with; of those, an ACL counts for a request when
  its principal is the request's (or `User:*`), its host the client's address (or `*`), and its
  operation the requested one or ALL;
- an ALLOW ACL for READ, WRITE, DELETE or ALTER also allows DESCRIBE, and one for ALTER_CONFIGS
  also allows DESCRIBE_CONFIGS; DENY ACLs imply nothing;
- one counting DENY refuses, whatever ALLOWs there are; else one counting ALLOW allows;
- else, when the resource has no ACL at all (for anyone), `allow.everyone.if.no.acl.found` decides;
  otherwise refused.

The index (AclIndex) is rebuilt from the whole ACL set on every change and swapped in one
assignment, so a decision never sees half a change; its `version` lets per-connection caches
(broker/security/authz_session.py) know when to forget their answers.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Iterator

from broker.security.acl import (IMPLIES_DESCRIBE, IMPLIES_DESCRIBE_CONFIGS, WILDCARD, WILDCARD_PRINCIPAL, AclBinding,
                                 AclOperation, AclPermissionType, PatternType, ResourceType)

log = logging.getLogger(__name__)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_VERSIONS = itertools.count(1)


class AclIndex:
    """ACLs grouped by resource: LITERAL by (type, name), PREFIXED by (type, prefix), plus the
    prefix lengths in use per type, so a lookup costs a few dict probes, not a scan."""

    def __init__(self, bindings: Iterable[AclBinding] = ()) -> None:
        self.bindings: tuple[AclBinding, ...] = tuple(sorted(set(bindings), key=lambda b: b.sort_key))
        self.version = next(_VERSIONS)
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefixed: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self.by_type: dict[ResourceType, list[AclBinding]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        for b in self.bindings:
            self.by_type.setdefault(b.resource_type, []).append(b)
            if b.pattern_type == PatternType.LITERAL:
                self._literal.setdefault((b.resource_type, b.name), []).append(b)
            else:
                self._prefixed.setdefault((b.resource_type, b.name), []).append(b)
                lengths.setdefault(b.resource_type, set()).add(len(b.name))
        self._prefix_lengths = {rt: tuple(sorted(ls)) for rt, ls in lengths.items()}

    def __len__(self) -> int:
        return len(self.bindings)

    def on_resource(self, rt: ResourceType, name: str) -> Iterator[AclBinding]:
        """Every ACL that applies to the resource, for any principal."""
        yield from self._literal.get((rt, name), ())
        if name != WILDCARD:
            yield from self._literal.get((rt, WILDCARD), ())
        for n in self._prefix_lengths.get(rt, ()):
            if n > len(name):
                break
            yield from self._prefixed.get((rt, name[:n]), ())


def _counts(acl: AclBinding, principal: str, host: str, op: AclOperation) -> bool:
    """Whether `acl` speaks about this principal, host and operation (Kafka's findResult)."""
    if acl.principal != principal and acl.principal != WILDCARD_PRINCIPAL:
        return False
    if acl.host != WILDCARD and acl.host != host:
        return False
    if acl.operation == AclOperation.ALL or acl.operation == op:
        return True
    if acl.permission != AclPermissionType.ALLOW:
        return False
    if op == AclOperation.DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    if op == AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


class StandardAuthorizer:
    def __init__(self, super_users: Iterable[str] = (), allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self.index = AclIndex()

    @property
    def version(self) -> int:
        return self.index.version

    def update(self, bindings: Iterable[AclBinding]) -> None:
        """Take the cluster's ACLs as they now are (the ACL store's subscriber)."""
        index = AclIndex(bindings)
        if index.bindings != self.index.bindings:
            log.info("authorizer: %d ACL%s in force", len(index), "" if len(index) == 1 else "s")
            self.index = index

    def authorize(self, principal: str, host: str, op: AclOperation, rt: ResourceType, name: str) -> bool:
        if principal in self.super_users:
            return True
        allowed = found = False
        for acl in self.index.on_resource(rt, name):
            found = True
            if not _counts(acl, principal, host, op):
                continue
            if acl.permission == AclPermissionType.DENY:
                return False
            allowed = True
        return allowed or (not found and self.allow_everyone_if_no_acl_found)

    def authorize_any(self, principal: str, host: str, op: AclOperation, rt: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: whether some resource of the type exists that the
        principal may do `op` on (an ALLOW not cancelled by a DENY covering all it covers); what
        InitProducerId without a transactional id asks (WRITE on any topic)."""
        if self.authorize(principal, host, op, rt, "hardcode"):  # super users, and the no-ACL default
            return True
        denied_literal: set[str] = set()
        denied_prefixes: list[str] = []
        allows: list[AclBinding] = []
        for acl in self.index.by_type.get(rt, ()):
            if not _counts(acl, principal, host, op):
                continue
            if acl.permission == AclPermissionType.DENY:
                if acl.pattern_type == PatternType.LITERAL:
                    if acl.name == WILDCARD:
                        return False
                    denied_literal.add(acl.name)
                else:
                    denied_prefixes.append(acl.name)
            else:
                allows.append(acl)
        for acl in allows:
            if any(acl.name.startswith(p) for p in denied_prefixes):
                continue
            if acl.pattern_type == PatternType.LITERAL and acl.name in denied_literal:
                continue
            return True
        return False
