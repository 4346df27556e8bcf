"""The dynamic log cleaner keys applied to this broker's LogCleaner, as Kafka's DynamicBrokerConfig
does for its LogCleaner: the values in force are the broker's own dynamic configs over the cluster
default over its properties (log/cleaner_settings.py). `check` is the broker config store's check
of an alteration (refused: INVALID_REQUEST, as Kafka), `apply` its subscriber. A change that reaches
this broker from another (the cluster default) and that this broker's cleaner cannot take (threads
more than double its count) is logged and not applied, as a Kafka broker does; before the cleaner
runs, stored values are taken whole, as Kafka reads them at start-up."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from broker.log import cleaner_settings
from broker.log.cleaner import LogCleaner
from broker.log.cleaner_settings import CleanerSettings, InvalidCleanerValue
from broker.metadata import broker_configs

log = logging.getLogger(__name__)


class CleanerReconfiguration:
    def __init__(self, broker_id: int, static: Mapping[str, str], cleaner: LogCleaner) -> None:
        self.broker_id = broker_id
        self.static = {k: v for k, v in static.items() if k in broker_configs.CLEANER_KEYS}
        self.cleaner = cleaner

    def settings(self, configs: broker_configs.ConfigMap) -> CleanerSettings:
        """InvalidCleanerValue if a stored value does not parse."""
        return cleaner_settings.from_values(broker_configs.cleaner_values(configs, self.broker_id, self.static))

    def _validated(self, configs: broker_configs.ConfigMap) -> CleanerSettings:
        new = self.settings(configs)
        if self.cleaner.running:
            cleaner_settings.check_change(self.cleaner.settings, new)
        else:
            cleaner_settings.check(new)
        return new

    def check(self, entity: str, configs: broker_configs.ConfigMap) -> None:
        """Refuse an alteration of this broker or the cluster default its cleaner could not take."""
        if entity not in (broker_configs.DEFAULT_ENTITY, str(self.broker_id)):
            return
        try:
            self._validated(configs)
        except InvalidCleanerValue as e:
            raise broker_configs.InvalidBrokerConfig(f"Invalid dynamic configuration: {e}") from None

    def apply(self, configs: broker_configs.ConfigMap) -> None:
        try:
            new = self._validated(configs)
        except InvalidCleanerValue as e:
            log.error("dynamic log cleaner configs not applied (%s); the cleaner keeps %s", e, self.cleaner.settings)
            return
        self.cleaner.reconfigure(new)
