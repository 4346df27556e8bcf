"""What AlterConfigs (key 33) and IncrementalAlterConfigs (key 44) do to one resource, as Kafka's
ConfigAdminManager does it: the new topic config map from the request's entries (whole map for
AlterConfigs; SET / DELETE / APPEND / SUBTRACT for the incremental API, APPEND and SUBTRACT on
list keys only), the refusals Kafka gives (duplicate keys, null values, resource types), and the
topic write through `Topics.alter_configs` (validated there, so only keys in force are stored).

A BROKER resource (this broker's id, or "" for the cluster default: another broker's id is refused,
as Kafka refuses it) changes the dynamic broker configs
(metadata/broker_configs.py): only the replication throttle rates and the log cleaner's dynamic
keys may be set; another key (to be set in the broker's properties), a value of the wrong type or
out of bounds, or one the cleaner cannot take (thread count steps) is INVALID_REQUEST, as Kafka
answers a broker config its validation refuses. Deleting
`replica.alter.log.dirs.io.max.bytes.per.second` (which `kafka-reassign-partitions.sh --verify`
deletes with the rates) succeeds as the deletion of a key that is not set. BROKER_LOGGER is refused.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from broker import topic_config
from broker.metadata import broker_configs
from broker.admin.topics import TopicError, TopicManager

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OP_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


@dataclass(frozen=True)
class Outcome:
    error_code: ErrorCode
    error_message: str | None = None


OK = Outcome(ErrorCode.none)


class AlterationError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


# A dynamic broker key Kafka's reassignment tool deletes (BROKER_LEVEL_THROTTLES); never set here.
UNSET_BROKER_KEYS = frozenset({"replica.alter.log.dirs.io.max.bytes.per.second"})


def deletes_unset_broker_keys(resource_type: int, entries: list[tuple[str, int, str | None]]) -> bool:
    """Whether an IncrementalAlterConfigs resource only deletes broker keys that are never set."""
    return resource_type == BROKER and bool(entries) and all(
        op == DELETE and name in UNSET_BROKER_KEYS for name, op, _ in entries)


def _no_duplicates(names: Iterable[str]) -> None:
    dupes = sorted(n for n, count in Counter(names).items() if count > 1)
    if dupes:
        raise AlterationError(ErrorCode.invalid_request, f"duplicate config keys: {', '.join(dupes)}")


def replace_all(entries: list[tuple[str, str | None]]) -> Callable[[dict[str, str]], dict[str, str]]:
    """AlterConfigs: the topic's own configs become exactly the given ones."""
    _no_duplicates(name for name, _ in entries)
    for name, value in entries:
        if value is None:
            raise AlterationError(ErrorCode.invalid_request, f"null value not supported for {name!r}")
    new = {name: value for name, value in entries if value is not None}
    return lambda _current: dict(new)


def _list_value(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


def incremental(entries: list[tuple[str, int, str | None]],
                in_force: Callable[[dict[str, str]], dict[str, str]]) -> Callable[[dict[str, str]], dict[str, str]]:
    """IncrementalAlterConfigs: each entry's operation applied to the current topic configs;
    APPEND and SUBTRACT on a key the topic does not set start from the value in force."""
    _no_duplicates(name for name, _, _ in entries)
    for name, op, value in entries:
        if op not in _OP_NAMES:
            raise AlterationError(ErrorCode.invalid_request, f"unknown config operation {op} for {name!r}")
        if op != DELETE and value is None:
            raise AlterationError(ErrorCode.invalid_request, f"null value not supported for {name!r}")
        if op in (APPEND, SUBTRACT):
            key = topic_config.BY_NAME.get(name)
            if (key is not None and key.type != topic_config.LIST) or name in broker_configs.DYNAMIC_KEYS:
                raise AlterationError(ErrorCode.invalid_config,
                                      f"config value {_OP_NAMES[op].lower()} is not allowed for config key {name!r}"
                                      " (not a list)")

    def change(current: dict[str, str]) -> dict[str, str]:
        out = dict(current)
        for name, op, value in entries:
            if op == SET:
                out[name] = value
            elif op == DELETE:
                out.pop(name, None)
            else:
                now = out.get(name)
                if now is None:
                    now = in_force(out).get(name)
                items = _list_value(now or "")
                if op == APPEND:
                    items += [v for v in _list_value(value) if v not in items]
                else:
                    items = [v for v in items if v not in _list_value(value)]
                out[name] = ",".join(items)
        return out

    return change


def java_int(text: str) -> int | None:
    """Integer.parseInt: an optional sign and ASCII digits, nothing else (Python's int() also takes
    spaces and underscores); None when it is not one."""
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    value = int(text)
    return value if -2**31 <= value < 2**31 else None


def broker_name_refusal(resource_name: str, node_id: int, *, describing: bool = False) -> str | None:
    """Why a BROKER resource's name is refused (None: it is "", the cluster default, or this
    broker's id), in Kafka's words, which differ between altering (ConfigAdminManager) and
    describing (ConfigHelper)."""
    if resource_name == broker_configs.DEFAULT_ENTITY:
        return None
    named = java_int(resource_name)
    if named is None:
        return f"{'Broker' if describing else 'Node'} id must be an integer, but it is: {resource_name}"
    if named != node_id:
        expected = f"{node_id} or empty string" if describing else str(node_id)
        return f"Unexpected broker id, expected {expected}, but received {resource_name}"
    return None


def refused_broker_name(resource_type: int, resource_name: str, node_id: int) -> Outcome | None:
    """Kafka's first check of a BROKER resource (ConfigAdminManager.preprocess): its name is empty
    (the cluster default) or this broker's id. A client sends a broker's own configs to that
    broker (Kafka's admin client does), so another id is INVALID_REQUEST, with Kafka's messages."""
    refusal = broker_name_refusal(resource_name, node_id) if resource_type == BROKER else None
    return None if refusal is None else Outcome(ErrorCode.invalid_request, refusal)


def _broker_entity(resource_name: str) -> str:
    """The entity of a BROKER resource: "" (cluster default) or a broker id, as Kafka accepts them."""
    if resource_name == broker_configs.DEFAULT_ENTITY:
        return resource_name
    named = java_int(resource_name)  # parsed as refused_broker_name parsed it ("01" is broker 1)
    if named is None or named < 0:
        raise AlterationError(ErrorCode.invalid_request,
                              f"broker resource name must be a broker id or empty, not {resource_name!r}")
    return str(named)


async def _alter_broker(store: "broker_configs.BrokerConfigStore | None", resource_name: str,
                        transform: Callable[[dict[str, str]], dict[str, str]], validate_only: bool) -> None:
    entity = _broker_entity(resource_name)
    if store is None:
        raise AlterationError(ErrorCode.invalid_request, "this broker keeps no dynamic broker configs")
    try:  # a DELETE of a key that is not set changes nothing; broker_configs.validate refuses other keys
        if validate_only:
            broker_configs.apply_change(store.configs, entity, transform, store.check)
        else:
            await store.alter(entity, transform)
    except broker_configs.InvalidBrokerConfig as e:  # Kafka: ConfigException -> INVALID_REQUEST
        raise AlterationError(ErrorCode.invalid_request, str(e)) from None


async def alter(topics: TopicManager, resource_type: int, resource_name: str,
                change: Callable[[], Callable[[dict[str, str]], dict[str, str]]], validate_only: bool,
                broker_store: "broker_configs.BrokerConfigStore | None" = None) -> Outcome:
    """One resource of either request; `change` builds the config transformation (it may refuse)."""
    try:
        if resource_type == BROKER:
            await _alter_broker(broker_store, resource_name, change(), validate_only)
            return OK
        if resource_type == BROKER_LOGGER:
            raise AlterationError(ErrorCode.invalid_request,
                                  "Flotilla has no dynamic broker loggers: set log levels in each broker's "
                                  "properties (KafkaCluster spec.config) and restart")
        if resource_type != TOPIC:
            raise AlterationError(ErrorCode.invalid_request, f"resource type {resource_type} is not supported")
        transform = change()
        await topics.alter_configs(resource_name, transform, validate_only=validate_only)
    except AlterationError as e:
        return Outcome(e.code, str(e))
    except TopicError as e:
        return Outcome(e.code, e.message)
    return OK
