"""What AlterConfigs (key 33) and IncrementalAlterConfigs (key 44) do to one resource, as Kafka's
ConfigAdminManager does it: the new topic config map from the request's entries (whole map for
AlterConfigs; SET / DELETE / APPEND / SUBTRACT for the incremental API, APPEND and SUBTRACT on
list keys only), the refusals Kafka gives (duplicate keys, null values, resource types), and the
topic write through `Topics.alter_configs` (validated there, so only keys in force are stored).

Brokers have no dynamic configuration: a BROKER or BROKER_LOGGER resource is refused with
INVALID_REQUEST saying to set the key in the broker's properties, except an incremental DELETE of
the reassignment throttle rates alone (`kafka-reassign-partitions.sh --verify` clears them on
every broker once a move is done): they can never be set here, so deleting them succeeds, as Kafka
answers the deletion of a key that is not set.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable, Iterable

from kio.schema.errors import ErrorCode

from broker import topic_config
from broker.server.topics import TopicError, TopicManager

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


# Dynamic broker keys Kafka's reassignment tool deletes (BROKER_LEVEL_THROTTLES); never set here.
UNSET_BROKER_KEYS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate",
                               "replica.alter.log.dirs.io.max.bytes.per.second"})


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
            if key is not None and key.type != topic_config.LIST:
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


async def alter(topics: TopicManager, resource_type: int, resource_name: str,
                change: Callable[[], Callable[[dict[str, str]], dict[str, str]]], validate_only: bool) -> Outcome:
    """One resource of either request; `change` builds the config transformation (it may refuse)."""
    try:
        if resource_type in (BROKER, BROKER_LOGGER):
            raise AlterationError(ErrorCode.invalid_request,
                                  "Flotilla brokers have no dynamic configuration: set the key in each broker's "
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
