"""The local-file ACL store (broker/metadata/acls.py): changes are written before they are
published, survive a restart, and a subscriber (the authorizer) sees each one."""

from __future__ import annotations

import asyncio

from broker.metadata.acls import FILE_NAME, FileAclStore
from broker.security.acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType


def _acl(name: str) -> AclBinding:
    return AclBinding(ResourceType.TOPIC, name, PatternType.LITERAL, "User:alice", "*", AclOperation.READ,
                      AclPermissionType.ALLOW)


def test_changes_persist_and_reach_subscribers(tmp_path):
    store = FileAclStore(tmp_path)
    seen = []
    store.subscribe(seen.append)
    asyncio.run(store.update(lambda cur: cur | {_acl("a"), _acl("b")}))
    asyncio.run(store.update(lambda cur: cur - {_acl("a")}))
    assert seen == [frozenset({_acl("a"), _acl("b")}), frozenset({_acl("b")})]
    assert (tmp_path / FILE_NAME).exists()
    assert FileAclStore(tmp_path).acls == frozenset({_acl("b")})
    asyncio.run(store.update(lambda cur: cur))  # no change: nothing written, nobody told
    assert len(seen) == 2
