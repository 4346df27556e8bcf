"""Dynamic broker configs (Kafka's BROKER config resources set with IncrementalAlterConfigs or
AlterConfigs), kept in the cluster metadata beside topics so every broker applies a change at once.

Only the keys Flotilla applies while running may be set (`DYNAMIC_KEYS`): the KIP-73 replication
throttle rates and the log cleaner's reconfigurable keys (log/cleaner_settings.py). An entity is a
broker id as a string, or "" for the cluster-wide default (kafka-configs.sh --entity-default); a
broker's own value wins over the default, which wins over its properties. A store may carry a
`check` of the whole result (the broker's: would its cleaner accept it?). The local-file
backend writes `flotilla-broker-configs.json` next to the metadata file, a fleet the ConfigMap of
kube_broker_configs.py (server/metadata_backends.py picks one).
"""

from __future__ import annotations

import abc
import json
import logging
import os
import types
from collections.abc import Callable, Mapping
from pathlib import Path

from broker.log import cleaner_settings

log = logging.getLogger(__name__)

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
RATE_KEYS = (LEADER_RATE, FOLLOWER_RATE)
CLEANER_KEYS = tuple(k.name for k in cleaner_settings.KEYS)
DYNAMIC_KEYS = RATE_KEYS + CLEANER_KEYS
DEFAULT_ENTITY = ""
FILE_NAME = "flotilla-broker-configs.json"
LONG_MAX = 2**63 - 1

ConfigMap = Mapping[str, Mapping[str, str]]


class InvalidBrokerConfig(Exception):
    """A key or value that cannot be set dynamically (a key Kafka cannot change at run time, a
    value its ConfigDef type or bound refuses, or one the component's own check refuses); the
    message says why. Kafka answers INVALID_REQUEST for all of these (KAFKA-13609 left it so)."""


def validate(name: str, value: str) -> str:
    """The stored form of one value: a known key, a rate a whole number of bytes per second >= 0,
    a cleaner key's value as given once Kafka's type and bound accept it."""
    if name in CLEANER_KEYS:
        try:
            cleaner_settings.parse(name, value)
        except cleaner_settings.InvalidCleanerValue as e:
            raise InvalidBrokerConfig(str(e)) from None
        return value
    if name not in DYNAMIC_KEYS:
        raise InvalidBrokerConfig(f"{name!r} cannot be updated dynamically on a Flotilla broker (dynamic keys: "
                                  f"{', '.join(DYNAMIC_KEYS)}); set it in each broker's properties")
    try:
        n = int(value.strip())
    except ValueError:
        raise InvalidBrokerConfig(f"invalid value {value!r} for {name}: not a whole number of bytes per second") from None
    if not 0 <= n <= LONG_MAX:
        raise InvalidBrokerConfig(f"invalid value {value!r} for {name}: must be between 0 and {LONG_MAX}")
    return str(n)


def effective(configs: ConfigMap, broker_id: int, key: str) -> tuple[str, bool] | None:
    """(value, from the cluster default?) of `key` for one broker, or None if neither sets it."""
    own = configs.get(str(broker_id), {}).get(key)
    if own is not None:
        return own, False
    default = configs.get(DEFAULT_ENTITY, {}).get(key)
    return (default, True) if default is not None else None


Check = Callable[[str, ConfigMap], None]  # (entity changed, configs after) -> None or InvalidBrokerConfig


def apply_change(current: ConfigMap, entity: str, change: Callable[[dict[str, str]], dict[str, str]],
                 check: Check | None = None) -> dict[str, dict[str, str]]:
    """The configs after one entity's transformation (validated); an entity left empty disappears."""
    out = {e: dict(v) for e, v in current.items()}
    new = {k: validate(k, v) for k, v in change(dict(out.get(entity, {}))).items()}
    if new:
        out[entity] = new
    else:
        out.pop(entity, None)
    if check is not None:
        check(entity, out)
    return out


def cleaner_values(configs: ConfigMap, broker_id: int, static: Mapping[str, str]) -> dict[str, str]:
    """The cleaner keys in force on one broker: own dynamic > cluster default > properties."""
    return cleaner_settings.layered(static, configs.get(DEFAULT_ENTITY, {}), configs.get(str(broker_id), {}))


def to_doc(configs: ConfigMap) -> dict:
    return {"version": 1, "brokers": {e: dict(sorted(v.items())) for e, v in sorted(configs.items())}}


def from_doc(doc: dict | None) -> dict[str, dict[str, str]]:
    """ValueError if `doc` is not such a document."""
    if not doc:
        return {}
    brokers = doc.get("brokers")
    if not isinstance(brokers, dict) or not all(isinstance(v, dict) for v in brokers.values()):
        raise ValueError("not a broker config document (no 'brokers' map of maps)")
    return {str(e): {str(k): str(x) for k, x in v.items()} for e, v in brokers.items()}


class BrokerConfigStore(abc.ABC):
    """The cluster's dynamic broker configs: read synchronously from `configs`, changed with `alter`."""

    configs: ConfigMap

    def __init__(self) -> None:
        self.configs = types.MappingProxyType({})
        self._subscribers: list[Callable[[ConfigMap], None]] = []
        self.check: Check | None = None

    def subscribe(self, callback: Callable[[ConfigMap], None]) -> None:
        self._subscribers.append(callback)

    def _publish(self, configs: Mapping[str, Mapping[str, str]]) -> None:
        self.configs = types.MappingProxyType({e: types.MappingProxyType(dict(v)) for e, v in configs.items()})
        for cb in list(self._subscribers):
            try:
                cb(self.configs)
            except Exception:
                log.exception("broker config subscriber failed")

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    @abc.abstractmethod
    async def alter(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        """Replace one entity's configs by `change(current)`, atomically; InvalidBrokerConfig refuses."""


class FileBrokerConfigStore(BrokerConfigStore):
    """One broker's dynamic configs in a JSON file, replaced atomically (temp file, fsync, rename)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.path = Path(directory) / FILE_NAME
        if self.path.exists():
            self._publish(from_doc(json.loads(self.path.read_text())))

    async def alter(self, entity: str, change: Callable[[dict[str, str]], dict[str, str]]) -> None:
        new = apply_change(self.configs, entity, change, self.check)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(to_doc(new), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._publish(new)
