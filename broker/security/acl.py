"""ACLs in Kafka's terms: resource patterns, bindings and the filters DescribeAcls/DeleteAcls send.

The numeric codes are Kafka's wire values (ResourceType, PatternType, AclOperation,
AclPermissionType), so requests, the store and the authorizer share one vocabulary. A binding is
what CreateAcls creates and the store keeps; a filter is what DescribeAcls and DeleteAcls match
bindings against (ANY matches every value, MATCH matches the patterns that would apply to a name).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

WILDCARD = "*"  # a LITERAL resource name matching every resource of its type, and the any-host
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# The resource types an authorizer holds ACLs for (USER is only for delegation tokens in Kafka).
AUTHORIZABLE = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID,
                ResourceType.DELEGATION_TOKEN, ResourceType.USER)
# ALLOW ACLs for these operations also allow DESCRIBE (resp. DESCRIBE_CONFIGS); DENY ACLs imply nothing.
IMPLIES_DESCRIBE = frozenset({AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                              AclOperation.DELETE, AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})
# What each resource type's *_authorized_operations bit set reports (Kafka's AclEntry.supportedOperations).
SUPPORTED_OPERATIONS = {
    ResourceType.TOPIC: (AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
                         AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                         AclOperation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                           AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                           AclOperation.DESCRIBE),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}
# The *_authorized_operations value of a response whose request did not ask for it (Integer.MIN_VALUE).
OPERATIONS_NOT_REQUESTED = -(2**31)


def operations_bits(ops) -> int:
    """Operations as the bit set *_authorized_operations carries: bit n set for the operation of code n."""
    bits = 0
    for op in ops:
        bits |= 1 << int(op)
    return bits


class InvalidAcl(ValueError):
    """A binding or filter Kafka refuses (INVALID_REQUEST); the message says why."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType
    principal: str  # "User:alice", or WILDCARD_PRINCIPAL
    host: str  # an address, or WILDCARD
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def create(cls, resource_type: int, name: str, pattern_type: int, principal: str, host: str,
               operation: int, permission: int) -> "AclBinding":
        """A binding from CreateAcls' fields, refused as Kafka's ControllerAcls/AclControlManager does."""
        rt, pt, op, perm = (_enum(ResourceType, resource_type), _enum(PatternType, pattern_type),
                            _enum(AclOperation, operation), _enum(AclPermissionType, permission))
        if rt in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"Invalid resourceType {rt.name}")
        if pt not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"Invalid patternType {pt.name}")
        if op in (AclOperation.UNKNOWN, AclOperation.ANY):
            raise InvalidAcl(f"Invalid operation {op.name}")
        if perm not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise InvalidAcl(f"Invalid permissionType {perm.name}")
        if not name:
            raise InvalidAcl("Resource name should not be empty")
        if rt == ResourceType.CLUSTER and (name != CLUSTER_NAME or pt != PatternType.LITERAL):
            raise InvalidAcl(f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}")
        if ":" not in principal or principal.startswith(":"):
            raise InvalidAcl(f"Could not parse principal from `{principal}` (no colon is found between "
                             "the principal type and the principal name)")
        if host is None or host == "":
            raise InvalidAcl("Host should not be empty")
        return cls(rt, name, pt, principal, host, op, perm)

    def to_json(self) -> dict:
        return {"resource_type": self.resource_type.name, "name": self.name, "pattern_type": self.pattern_type.name,
                "principal": self.principal, "host": self.host, "operation": self.operation.name,
                "permission": self.permission.name}

    @classmethod
    def from_json(cls, d: dict) -> "AclBinding":
        return cls(ResourceType[d["resource_type"]], d["name"], PatternType[d["pattern_type"]], d["principal"],
                   d["host"], AclOperation[d["operation"]], AclPermissionType[d["permission"]])

    @property
    def sort_key(self) -> tuple:
        return (self.resource_type, self.pattern_type, self.name, self.principal, self.host, self.operation,
                self.permission)

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
                f"permissionType={self.permission.name}) on {self.resource_type.name}:"
                f"{self.pattern_type.name}:{self.name}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """DescribeAcls/DeleteAcls' filter: None (name, principal, host) and ANY match everything."""

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    @classmethod
    def create(cls, resource_type: int, name: str | None, pattern_type: int, principal: str | None,
               host: str | None, operation: int, permission: int) -> "AclBindingFilter":
        f = cls(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type), principal, host,
                _enum(AclOperation, operation), _enum(AclPermissionType, permission))
        for what, value in (("resourceType", f.resource_type), ("patternType", f.pattern_type),
                            ("operation", f.operation), ("permissionType", f.permission)):
            if value.name == "UNKNOWN":
                raise InvalidAcl(f"Filter contains UNKNOWN elements ({what})")
        return f

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if not self._matches_pattern(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != b.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == b.permission

    def _matches_pattern(self, b: AclBinding) -> bool:
        pt = self.pattern_type
        if pt == PatternType.MATCH:
            # Every pattern that would apply to the named resource: the literal name, the wildcard,
            # prefixes of the name (Kafka's ResourcePatternFilter.matches with MATCH).
            if self.name is None:
                return True
            if b.pattern_type == PatternType.LITERAL:
                return b.name == self.name or b.name == WILDCARD
            return self.name.startswith(b.name)
        if pt != PatternType.ANY and pt != b.pattern_type:
            return False
        return self.name is None or self.name == b.name

    def matches_at_most_one(self) -> bool:
        """Whether the filter names one binding exactly (Kafka's findIndefiniteField is None)."""
        return (self.resource_type != ResourceType.ANY and self.name is not None
                and self.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED)
                and self.principal is not None and self.host is not None
                and self.operation != AclOperation.ANY and self.permission != AclPermissionType.ANY)


def _enum(kind, value: int):
    try:
        return kind(value)
    except ValueError:
        return kind.UNKNOWN
