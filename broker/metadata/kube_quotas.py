"""Client quotas of a fleet in the Kubernetes API: the ConfigMap `<cluster>-client-quotas` (data key
`quotas.json`, the document the file backend writes), watched by every broker through
kube_document.py, so an AlterClientQuotas answered by any broker is applied by all of them as soon
as their watch delivers the change (well under a second on a healthy API server). A write is
compare-and-set on the ConfigMap (a lost race reads again and reapplies the one entity's change).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from broker.metadata.client_quotas import ClientQuotaStore, QuotaEntity, apply_changes, from_doc, to_doc
from broker.metadata.kube_document import KubeDocument
from broker.metadata.names import client_quotas_name as config_map_name

log = logging.getLogger(__name__)

DATA_KEY = "quotas.json"


def _parse(doc: dict | None) -> dict[QuotaEntity, dict[str, float]]:
    """The quotas of a document; ValueError if it is not one (what KubeDocument.update reports)."""
    try:
        return from_doc(doc) if doc else {}
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"not a quota document ({type(e).__name__}: {e})") from None


class KubernetesClientQuotaStore(ClientQuotaStore):
    def __init__(self, metadata_store) -> None:
        super().__init__()
        self.document = KubeDocument(metadata_store, "ConfigMap", config_map_name(metadata_store.cluster_name),
                                     DATA_KEY, self._on_document)

    @property
    def name(self) -> str:
        return self.document.name

    def _on_document(self, doc: dict | None) -> None:
        try:
            quotas = _parse(doc)
        except ValueError as e:
            log.error("client quotas: ConfigMap %s does not parse (%s); keeping the quotas in force", self.name, e)
            return
        if quotas != {e: dict(v) for e, v in self.quotas.items()}:
            log.info("client quotas: %d entit%s from %s", len(quotas), "y" if len(quotas) == 1 else "ies", self.name)
            self._publish(quotas)

    async def start(self) -> None:
        await self.document.start()

    async def close(self) -> None:
        await self.document.close()

    async def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        await self.document.update(lambda doc: to_doc(apply_changes(_parse(doc), entity, changes)))
