"""Dynamic broker configs of a fleet in the Kubernetes API: the ConfigMap `<cluster>-broker-configs`
(data key `brokers.json`, the document the file backend writes), watched by every broker through
kube_document.py, so a throttle set through any broker applies on all of them. A write is
compare-and-set on the ConfigMap (a lost race reads again and reapplies the one entity's change).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from broker.metadata.broker_configs import BrokerConfigStore, apply_change, from_doc, to_doc
from broker.metadata.kube_document import KubeDocument
from broker.metadata.names import broker_configs_name as config_map_name

log = logging.getLogger(__name__)

DATA_KEY = "brokers.json"


class KubernetesBrokerConfigStore(BrokerConfigStore):
    def __init__(self, metadata_store) -> None:
        super().__init__()
        self.document = KubeDocument(metadata_store, "ConfigMap", config_map_name(metadata_store.cluster_name),
                                     DATA_KEY, self._on_document)

    @property
    def name(self) -> str:
        return self.document.name

    def _on_document(self, doc: dict | None) -> None:
        try:
            configs = from_doc(doc)
        except ValueError as e:
            log.error("broker configs: ConfigMap %s does not parse (%s); keeping the configs in force", self.name, e)
            return
        if configs != {e: dict(v) for e, v in self.configs.items()}:
            log.info("dynamic broker configs from %s: %s", self.name, configs)
            self._publish(configs)

    async def start(self) -> None:
        await self.document.start()

    async def close(self) -> None:
        await self.document.close()

    async def alter(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        await self.document.update(lambda doc: to_doc(apply_change(from_doc(doc), entity, change, self.check)))
