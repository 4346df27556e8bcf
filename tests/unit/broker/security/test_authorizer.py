"""StandardAuthorizer decisions (broker/security/authorizer.py): the rules of Kafka's
StandardAuthorizerData, one per test, plus the ACL filters of DescribeAcls/DeleteAcls and the
per-connection cache's invalidation."""

from __future__ import annotations

import pytest

from broker.security.acl import (CLUSTER_NAME, AclBinding, AclBindingFilter, AclOperation as Op,
                                 AclPermissionType as Perm, InvalidAcl, PatternType as Pat, ResourceType as RT)
from broker.security.authorizer import StandardAuthorizer
from broker.security.authz_session import AuthzSession, peer_host

ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"


def acl(name, op=Op.READ, perm=Perm.ALLOW, principal=ALICE, rt=RT.TOPIC, pat=Pat.LITERAL, host="*"):
    return AclBinding(rt, name, pat, principal, host, op, perm)


def authorizer(*acls, super_users=(), allow_if_none=False) -> StandardAuthorizer:
    a = StandardAuthorizer(super_users, allow_if_none)
    a.update(acls)
    return a


def test_literal_allow_applies_to_that_name_only():
    a = authorizer(acl("orders"))
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "orders2")
    assert not a.authorize(BOB, HOST, Op.READ, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "orders")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.GROUP, "orders")  # another resource type


def test_prefixed_pattern_covers_names_starting_with_it():
    a = authorizer(acl("team-a.", pat=Pat.PREFIXED))
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "team-a.orders")
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "team-a.")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "team-a")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "team-b.orders")


def test_wildcard_resource_and_wildcard_principal():
    a = authorizer(acl("*", principal="User:*"))
    assert a.authorize(BOB, HOST, Op.READ, RT.TOPIC, "anything")
    assert not a.authorize(BOB, HOST, Op.WRITE, RT.TOPIC, "anything")


def test_deny_beats_allow_wherever_it_comes_from():
    a = authorizer(acl("*", op=Op.ALL), acl("secret", pat=Pat.PREFIXED, op=Op.READ, perm=Perm.DENY))
    assert a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "public")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "secret-plans")
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "secret-plans")  # the DENY is for READ only


def test_deny_all_operations_refuses_describe_too():
    a = authorizer(acl("t", op=Op.ALL), acl("t", op=Op.ALL, perm=Perm.DENY, principal="User:*"))
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")


def test_allow_implies_describe_and_describe_configs_but_deny_implies_nothing():
    a = authorizer(acl("t", op=Op.WRITE), acl("t", op=Op.ALTER_CONFIGS))
    assert a.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")
    assert a.authorize(ALICE, HOST, Op.DESCRIBE_CONFIGS, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")
    b = authorizer(acl("t", op=Op.DESCRIBE), acl("t", op=Op.READ, perm=Perm.DENY))
    assert b.authorize(ALICE, HOST, Op.DESCRIBE, RT.TOPIC, "t")  # a DENY of READ does not deny DESCRIBE
    c = authorizer(acl("t", op=Op.DESCRIBE_CONFIGS))
    assert not c.authorize(ALICE, HOST, Op.ALTER_CONFIGS, RT.TOPIC, "t")  # implication goes one way


def test_hosts():
    a = authorizer(acl("t", host="10.0.0.1"), acl("t", op=Op.WRITE, perm=Perm.DENY, host="10.0.0.2"))
    assert a.authorize(ALICE, "10.0.0.1", Op.READ, RT.TOPIC, "t")
    assert not a.authorize(ALICE, "10.0.0.2", Op.READ, RT.TOPIC, "t")


def test_super_users_bypass_deny():
    a = authorizer(acl("t", op=Op.ALL, perm=Perm.DENY, principal="User:*"), super_users={"User:admin"})
    assert a.authorize("User:admin", HOST, Op.DELETE, RT.TOPIC, "t")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "t")


def test_allow_everyone_only_where_the_resource_has_no_acl_at_all():
    a = authorizer(acl("guarded", principal=BOB), allow_if_none=True)
    assert a.authorize(ALICE, HOST, Op.WRITE, RT.TOPIC, "open")
    assert not a.authorize(ALICE, HOST, Op.READ, RT.TOPIC, "guarded")  # has an ACL (for bob): no default
    assert not authorizer(allow_if_none=False).authorize(ALICE, HOST, Op.READ, RT.TOPIC, "open")


def test_authorize_any_is_kafkas_authorize_by_resource_type():
    assert authorizer(acl("x", op=Op.WRITE, pat=Pat.PREFIXED)).authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not authorizer(acl("x", op=Op.READ)).authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    # an ALLOW cancelled by a DENY covering it, or a DENY on every topic
    assert not authorizer(acl("x.y", op=Op.WRITE), acl("x", op=Op.WRITE, perm=Perm.DENY, pat=Pat.PREFIXED)
                          ).authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert not authorizer(acl("a", op=Op.WRITE), acl("*", op=Op.WRITE, perm=Perm.DENY)
                          ).authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)
    assert authorizer(super_users={ALICE}).authorize_any(ALICE, HOST, Op.WRITE, RT.TOPIC)


def test_session_cache_follows_acl_changes_and_counts_denials():
    class Counter:
        def __init__(self):
            self.seen = []

        def labels(self, *labels):
            self.seen.append(labels)
            return self

        def inc(self):
            pass

    a = authorizer()
    denials = Counter()
    s = AuthzSession(a, ALICE, HOST, denials)
    assert not s.allowed(Op.READ, RT.TOPIC, "t")
    a.update([acl("t")])
    assert s.allowed(Op.READ, RT.TOPIC, "t")  # the cached refusal is forgotten
    a.update([])
    assert not s.allowed(Op.READ, RT.TOPIC, "t")
    assert denials.seen == [("TOPIC", "READ"), ("TOPIC", "READ")]
    assert not s.quietly(Op.WRITE, RT.TOPIC, "t") and len(denials.seen) == 2
    assert s.cluster(Op.ALTER) is False


def test_bindings_are_validated_as_kafka_does():
    with pytest.raises(InvalidAcl, match="CLUSTER"):
        AclBinding.create(RT.CLUSTER, "other", Pat.LITERAL, ALICE, "*", Op.ALTER, Perm.ALLOW)
    with pytest.raises(InvalidAcl, match="patternType"):
        AclBinding.create(RT.TOPIC, "t", Pat.MATCH, ALICE, "*", Op.READ, Perm.ALLOW)
    with pytest.raises(InvalidAcl, match="operation"):
        AclBinding.create(RT.TOPIC, "t", Pat.LITERAL, ALICE, "*", Op.ANY, Perm.ALLOW)
    with pytest.raises(InvalidAcl, match="principal"):
        AclBinding.create(RT.TOPIC, "t", Pat.LITERAL, "alice", "*", Op.READ, Perm.ALLOW)
    b = AclBinding.create(RT.CLUSTER, CLUSTER_NAME, Pat.LITERAL, ALICE, "*", Op.ALTER, Perm.ALLOW)
    assert AclBinding.from_json(b.to_json()) == b


def test_filters_any_and_match():
    lit, pre, wild = acl("team-a.orders"), acl("team-a.", pat=Pat.PREFIXED), acl("*")
    other = acl("team-b", op=Op.WRITE, principal=BOB)
    everything = AclBindingFilter(RT.ANY, None, Pat.ANY, None, None, Op.ANY, Perm.ANY)
    assert all(everything.matches(b) for b in (lit, pre, wild, other))
    match = AclBindingFilter(RT.TOPIC, "team-a.orders", Pat.MATCH, None, None, Op.ANY, Perm.ANY)
    assert [b for b in (lit, pre, wild, other) if match.matches(b)] == [lit, pre, wild]
    exact = AclBindingFilter(RT.TOPIC, "team-a.", Pat.PREFIXED, ALICE, "*", Op.READ, Perm.ALLOW)
    assert [b for b in (lit, pre, wild, other) if exact.matches(b)] == [pre]
    assert [b for b in (lit, pre, wild, other)
            if AclBindingFilter(RT.ANY, None, Pat.ANY, BOB, None, Op.ANY, Perm.ANY).matches(b)] == [other]
    with pytest.raises(InvalidAcl):
        AclBindingFilter.create(0, None, Pat.ANY, None, None, Op.ANY, Perm.ANY)


def test_peer_host():
    assert peer_host("10.1.2.3:5555") == "10.1.2.3"
    assert peer_host("::1:5555") == "::1"


def test_authorized_operations_bit_sets_as_kafka_computes_them():
    """Kafka's AuthHelper.authorizedOperations: the type's supported operations the principal may
    do (implied ones included), bit n for code n; not denials. The cluster's is 0 without DESCRIBE."""
    from broker.security.authz_session import ALLOW_ALL

    class Counter:
        seen = 0

        def labels(self, *labels):
            return self

        def inc(self):
            Counter.seen += 1

    a = authorizer(acl("t"), acl("g", Op.DELETE, rt=RT.GROUP), acl(CLUSTER_NAME, Op.IDEMPOTENT_WRITE, rt=RT.CLUSTER))
    s = AuthzSession(a, ALICE, HOST, Counter())
    assert s.operations(RT.TOPIC, "t") == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert s.operations(RT.GROUP, "g") == (1 << Op.DELETE) | (1 << Op.DESCRIBE)
    assert s.operations(RT.TOPIC, "other") == 0 and Counter.seen == 0
    assert s.cluster_operations() == 0 and Counter.seen == 1  # the DESCRIBE check is a real one
    a.update([acl(CLUSTER_NAME, Op.IDEMPOTENT_WRITE, rt=RT.CLUSTER), acl(CLUSTER_NAME, Op.DESCRIBE, rt=RT.CLUSTER)])
    assert s.cluster_operations() == (1 << Op.DESCRIBE) | (1 << Op.IDEMPOTENT_WRITE)
    assert ALLOW_ALL.operations(RT.GROUP, "g") == sum(1 << op for op in (
        Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS))
    assert ALLOW_ALL.cluster_operations() == sum(1 << op for op in (
        Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE))
