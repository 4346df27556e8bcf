"""Dynamic client quotas in the cluster metadata (KIP-13 / KIP-546's entities), apart from topics.

A quota entity is Kafka's ClientQuotaEntity: a map from entity type (`user`, `client-id`) to a
name, where None names the type's default entity. Each entity holds values for the quota keys
(`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`). AlterClientQuotas writes here;
every broker's ClientQuotaManager follows `subscribe`, so a change applies without a restart.

Kept beside the topic store rather than inside it so that backends can add it on their own; the
local-file backend writes `flotilla-quotas.json` next to the metadata file (one broker).
"""

from __future__ import annotations

import abc
import json
import logging
import os
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)
# Keys whose values are whole numbers (Kafka types them LONG).
WHOLE_NUMBER_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE)

FILE_NAME = "flotilla-quotas.json"


class InvalidQuota(ValueError):
    """An entity or a quota value AlterClientQuotas must refuse (INVALID_REQUEST); the message says why."""


@dataclass(frozen=True)
class QuotaEntity:
    """(type, name) pairs sorted by type; a None name is the type's default entity."""

    parts: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, pairs: Iterable[tuple[str, str | None]]) -> "QuotaEntity":
        seen: dict[str, str | None] = {}
        for entity_type, name in pairs:
            if entity_type in seen:
                raise InvalidQuota(f"entity type {entity_type!r} appears twice in one entity")
            seen[entity_type] = name
        return cls(tuple(sorted(seen.items())))

    @classmethod
    def user_client(cls, user: str | None | type(...) = ..., client_id: str | None | type(...) = ...) -> "QuotaEntity":
        """`...` leaves a type out; None is its default entity."""
        pairs = []
        if user is not ...:
            pairs.append((USER, user))
        if client_id is not ...:
            pairs.append((CLIENT_ID, client_id))
        return cls.of(pairs)

    @property
    def sort_key(self) -> tuple:
        """Defaults first, then names: a stable order for files and answers."""
        return tuple((t, n is not None, n or "") for t, n in self.parts)

    def as_dict(self) -> dict[str, str | None]:
        return dict(self.parts)

    def validate(self) -> None:
        types_ = [t for t, _ in self.parts]
        if not types_:
            raise InvalidQuota("the entity names no entity type")
        for t in types_:
            if t not in ENTITY_TYPES:
                raise InvalidQuota(f"unsupported entity type {t!r} (supported: user, client-id)")

    def __str__(self) -> str:
        return ",".join(f"{t}={'<default>' if n is None else n}" for t, n in self.parts)


def validate_value(key: str, value: float) -> None:
    """Kafka's checks: a known key, a positive value, whole numbers for byte rates."""
    if key not in QUOTA_KEYS:
        raise InvalidQuota(f"unknown quota key {key!r} (supported: {', '.join(QUOTA_KEYS)})")
    if not value > 0 or value != value or value == float("inf"):
        raise InvalidQuota(f"{key} must be a positive number, not {value}")
    if key in WHOLE_NUMBER_KEYS and value != int(value):
        raise InvalidQuota(f"{key} must be a whole number of bytes per second, not {value}")


QuotaMap = Mapping[QuotaEntity, Mapping[str, float]]


def apply_changes(current: QuotaMap, entity: QuotaEntity, changes: Mapping[str, float | None]) -> dict[QuotaEntity, dict[str, float]]:
    """The quotas after setting (value) or removing (None) keys of one entity; an entity left
    without values disappears."""
    out = {e: dict(v) for e, v in current.items()}
    values = out.setdefault(entity, {})
    for key, value in changes.items():
        if value is None:
            values.pop(key, None)
        else:
            values[key] = float(value)
    if not values:
        del out[entity]
    return out


class ClientQuotaStore(abc.ABC):
    """The cluster's dynamic quotas: read synchronously from `quotas`, changed with `alter`."""

    quotas: QuotaMap

    def __init__(self) -> None:
        self.quotas = types.MappingProxyType({})
        self._subscribers: list[Callable[[QuotaMap], None]] = []

    def subscribe(self, callback: Callable[[QuotaMap], None]) -> None:
        self._subscribers.append(callback)

    def _publish(self, quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        self.quotas = types.MappingProxyType({e: types.MappingProxyType(dict(v)) for e, v in quotas.items()})
        for cb in list(self._subscribers):
            try:
                cb(self.quotas)
            except Exception:
                log.exception("client quota subscriber failed")

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    @abc.abstractmethod
    async def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        """Set (value) or remove (None) quota keys of one entity, atomically."""


def _to_doc(quotas: QuotaMap) -> dict:
    return {"version": 1, "quotas": [
        {"entity": [{"type": t, "name": n} for t, n in e.parts], "values": dict(sorted(v.items()))}
        for e, v in sorted(quotas.items(), key=lambda kv: kv[0].sort_key)]}


def _from_doc(doc: dict) -> dict[QuotaEntity, dict[str, float]]:
    return {QuotaEntity.of((p["type"], p["name"]) for p in q["entity"]): {k: float(x) for k, x in q["values"].items()}
            for q in doc.get("quotas", [])}


class FileClientQuotaStore(ClientQuotaStore):
    """One broker's quotas in a JSON file, replaced atomically (temp file, fsync, rename)."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.path = Path(directory) / FILE_NAME
        if self.path.exists():
            self._publish(_from_doc(json.loads(self.path.read_text())))

    async def alter(self, entity: QuotaEntity, changes: Mapping[str, float | None]) -> None:
        new = apply_changes(self.quotas, entity, changes)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            json.dump(_to_doc(new), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        self._publish(new)


def open_quota_store(config, metadata_store, directory: Path) -> ClientQuotaStore:
    """The quota store matching the metadata backend: a ConfigMap in a fleet, a file beside one broker."""
    if type(metadata_store).__name__ == "KubernetesMetadataStore":
        from broker.metadata.kube_quotas import KubernetesClientQuotaStore

        return KubernetesClientQuotaStore(metadata_store)
    return FileClientQuotaStore(directory)
