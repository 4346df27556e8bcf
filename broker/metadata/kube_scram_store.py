"""SCRAM credentials of a fleet in the Kubernetes API: one Secret per cluster.

`<cluster>-scram-credentials` (label flotilla.io/cluster, owned by the KafkaCluster) holds the
document the file backend writes (data key `credentials.json`): salts, iterations, StoredKeys and
ServerKeys, never passwords. A Secret rather than a ConfigMap: the keys let anyone who reads
them try passwords offline, so they get Secrets' access rules (and encryption at rest where the
cluster has it). Every broker watches it (broker/metadata/kube_document.py), so a credential
altered through any broker authenticates on all of them within about a second.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from broker.metadata.kube_document import KubeDocument
from broker.metadata.names import scram_credentials_name as secret_name
from broker.security.credentials import ScramCredential
from broker.security.scram_store import Key, ScramCredentialStore, apply_changes, from_doc, to_doc

log = logging.getLogger(__name__)

DATA_KEY = "credentials.json"


class KubernetesScramCredentialStore(ScramCredentialStore):
    def __init__(self, metadata_store) -> None:
        super().__init__()
        self.document = KubeDocument(metadata_store, "Secret", secret_name(metadata_store.cluster_name), DATA_KEY,
                                     self._changed)

    def _changed(self, document: dict | None) -> None:
        try:
            credentials = from_doc(document or {})
        except (KeyError, ValueError, TypeError) as e:
            log.error("SCRAM credentials: Secret %s holds a document that does not parse (%s); keeping the "
                      "credentials in force", self.document.name, e)
            return
        if credentials != dict(self.credentials):
            self._publish(credentials)

    async def start(self) -> None:
        await self.document.start()

    async def close(self) -> None:
        await self.document.close()

    async def alter(self, changes: Mapping[Key, ScramCredential | None]) -> None:
        await self.document.update(lambda doc: to_doc(apply_changes(from_doc(doc or {}), changes)))
