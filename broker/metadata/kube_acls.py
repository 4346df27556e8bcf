"""A fleet's ACLs in the Kubernetes API: the ConfigMap `<cluster>-acls` (data key `acls.json`, the
document the file backend writes), watched by every broker, so a CreateAcls or DeleteAcls answered
by any broker is enforced by all of them as soon as their watch delivers it (well under a second on
a healthy API server)."""

from __future__ import annotations

import logging

from broker.metadata.acls import AclSet, AclStore, Change, from_doc, to_doc
from broker.metadata.kube_document import KubeDocument
from broker.metadata.names import acls_name as config_map_name

log = logging.getLogger(__name__)

DATA_KEY = "acls.json"


class KubernetesAclStore(AclStore):
    def __init__(self, metadata_store) -> None:
        super().__init__()
        self.document = KubeDocument(metadata_store, "ConfigMap", config_map_name(metadata_store.cluster_name),
                                     DATA_KEY, self._on_document)

    def _on_document(self, doc: dict | None) -> None:
        acls = from_doc(doc) if doc else frozenset()
        if acls != self.acls:
            self._publish(acls)

    async def start(self) -> None:
        await self.document.start()

    async def close(self) -> None:
        await self.document.close()

    async def update(self, change: Change) -> AclSet:
        doc = await self.document.update(lambda current: to_doc(change(from_doc(current) if current else frozenset())))
        return from_doc(doc)
