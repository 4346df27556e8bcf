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


def test_fleet_store_reads_and_writes_the_configmap_document():
    """KubernetesAclStore's glue: the ConfigMap's document is the file backend's; a write applies
    the change to the document as read (compare-and-set lives in kube_document.py)."""
    from types import SimpleNamespace

    from broker.metadata.kube_acls import KubernetesAclStore, config_map_name

    store = KubernetesAclStore(SimpleNamespace(cluster_name="demo", namespace="kafka"))
    assert store.document.name == config_map_name("demo") == "demo-acls"
    stored: dict = {"doc": None}

    async def update(change):
        stored["doc"] = change(stored["doc"])
        store._on_document(stored["doc"])  # what the watch delivers
        return stored["doc"]

    store.document.update = update
    seen = []
    store.subscribe(seen.append)
    asyncio.run(store.update(lambda cur: cur | {_acl("a")}))
    assert stored["doc"]["acls"][0]["name"] == "a" and seen == [frozenset({_acl("a")})]
    store._on_document(None)  # the ConfigMap deleted: no ACLs
    assert store.acls == frozenset()
