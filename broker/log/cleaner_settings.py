"""The log cleaner's settings that Kafka lets an operator change on a running broker
(LogCleaner.ReconfigurableConfigs): the number of workers, the dedupe buffer, the I/O buffer and
I/O rate, and the backoff. Each key has Kafka's type, default and lower bound; a broker's values
come from its properties (static) overlaid by the dynamic broker configs (cluster default, then its
own: metadata/broker_configs.py), and a change is checked against the values in force as Kafka's
LogCleaner.validateReconfiguration and KafkaConfig do (`check_change`).

Kafka sizes memory in bytes; Flotilla's offset map is a dict of MD5 digests, about `ENTRY_BYTES` an
entry, so the dedupe buffer becomes a number of keys per worker (`map_capacity`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

THREADS = "log.cleaner.threads"
DEDUPE_BUFFER_SIZE = "log.cleaner.dedupe.buffer.size"
IO_BUFFER_SIZE = "log.cleaner.io.buffer.size"
LOAD_FACTOR = "log.cleaner.io.buffer.load.factor"  # Kafka's name for the dedupe buffer load factor
IO_MAX_BYTES_PER_SECOND = "log.cleaner.io.max.bytes.per.second"
BACKOFF_MS = "log.cleaner.backoff.ms"

INT, LONG, DOUBLE = "INT", "LONG", "DOUBLE"
ENTRY_BYTES = 128  # what one key of the offset map costs in Python (digest, offset, dict slot)
MIN_DEDUPE_PER_THREAD = 1024 * 1024  # KafkaConfig: more than 1 MiB of dedupe buffer per worker
MIN_READ_CHUNK = 4096
_INT_MAX, _LONG_MAX = 2**31 - 1, 2**63 - 1
DOUBLE_MAX = "1.7976931348623157E308"  # Java's Double.MAX_VALUE, as Kafka prints the default


@dataclass(frozen=True)
class CleanerKey:
    name: str
    type: str
    default: str
    minimum: int | None  # Kafka's atLeast(n) validator, if any
    doc: str


KEYS: tuple[CleanerKey, ...] = (
    CleanerKey(THREADS, INT, "1", 0, "Log cleaner workers (cleanings that run at once); a change may at most "
                                     "halve or double the count in force."),
    CleanerKey(DEDUPE_BUFFER_SIZE, LONG, str(128 * 1024 * 1024), None,
               "Memory for the cleaner's key maps, shared by its workers; more than 1 MiB per worker."),
    CleanerKey(IO_BUFFER_SIZE, INT, str(512 * 1024), 0,
               "Memory for the cleaner's read and write buffers, shared by its workers."),
    CleanerKey(LOAD_FACTOR, DOUBLE, "0.9", None, "How full a worker's key map may become before the rest of the "
                                                 "dirty section waits for the next cleaning."),
    CleanerKey(IO_MAX_BYTES_PER_SECOND, DOUBLE, DOUBLE_MAX, None,
               "Bytes per second the cleaner's workers may read and write together (0 pauses their I/O)."),
    CleanerKey(BACKOFF_MS, LONG, "15000", 0, "How long a cleaner worker sleeps when no log needs cleaning."),
)
BY_NAME = {k.name: k for k in KEYS}


class InvalidCleanerValue(ValueError):
    """A value Kafka's ConfigDef refuses (type or lower bound); the message is Kafka's sense."""


def parse(name: str, value: str) -> int | float:
    """`value` of key `name` as Kafka's ConfigDef parses it (numbers trimmed, bounds checked)."""
    key = BY_NAME[name]
    text = value.strip()
    try:
        if key.type == DOUBLE:
            parsed: int | float = float(text)
        else:
            parsed = int(text)
            if not -(_LONG_MAX + 1) <= parsed <= _LONG_MAX or (key.type == INT and not -(_INT_MAX + 1) <= parsed <= _INT_MAX):
                raise ValueError
    except ValueError:
        raise InvalidCleanerValue(f"Invalid value {value} for configuration {name}: Not a number of type {key.type}") from None
    if key.minimum is not None and parsed < key.minimum:
        raise InvalidCleanerValue(f"Invalid value {value} for configuration {name}: Value must be at least {key.minimum}")
    return parsed


def parser(name: str) -> Callable[[str], int | float]:
    """A parse function for broker/config.py's static key."""
    return lambda value: parse(name, value)


@dataclass(frozen=True)
class CleanerSettings:
    """The values in force; derived sizes are per worker, as Kafka divides them."""

    threads: int = 1
    dedupe_buffer_size: int = 128 * 1024 * 1024
    load_factor: float = 0.9
    io_buffer_size: int = 512 * 1024
    io_max_bytes_per_second: float = float(DOUBLE_MAX)
    backoff_ms: int = 15_000

    @property
    def map_capacity(self) -> int:
        """Keys one worker's offset map holds (Kafka: dedupe buffer / threads, times the load factor)."""
        per_worker = self.dedupe_buffer_size // max(self.threads, 1)
        return max(1, int(per_worker // ENTRY_BYTES * self.load_factor))

    @property
    def read_chunk(self) -> int:
        """A worker's read buffer (Kafka: I/O buffer / threads / 2, the other half writes); a batch
        larger than it is read whole."""
        return max(MIN_READ_CHUNK, self.io_buffer_size // max(self.threads, 1) // 2)

    @property
    def write_buffer(self) -> int:
        return self.read_chunk


_FIELDS = {THREADS: "threads", DEDUPE_BUFFER_SIZE: "dedupe_buffer_size", LOAD_FACTOR: "load_factor",
           IO_BUFFER_SIZE: "io_buffer_size", IO_MAX_BYTES_PER_SECOND: "io_max_bytes_per_second", BACKOFF_MS: "backoff_ms"}


def from_values(values: Mapping[str, str]) -> CleanerSettings:
    """Settings from key -> string (keys absent take Kafka's default); InvalidCleanerValue."""
    return CleanerSettings(**{_FIELDS[k.name]: parse(k.name, values.get(k.name, k.default)) for k in KEYS})


def layered(static: Mapping[str, str], cluster_default: Mapping[str, str], own: Mapping[str, str]) -> dict[str, str]:
    """The cleaner keys in force for one broker: its own dynamic value, else the cluster default,
    else its properties (absent: Kafka's default)."""
    out = {}
    for k in KEYS:
        for source in (own, cluster_default, static):
            if k.name in source:
                out[k.name] = source[k.name]
                break
    return out


def check(settings: CleanerSettings) -> None:
    """KafkaConfig's own rule, at start-up and on every change (Kafka divides by the thread count,
    so 0 threads fails there too)."""
    if settings.threads < 1:
        raise InvalidCleanerValue("Log cleaner threads should be at least 1")
    if settings.dedupe_buffer_size // settings.threads <= MIN_DEDUPE_PER_THREAD:
        raise InvalidCleanerValue(f"{DEDUPE_BUFFER_SIZE} must be at least 1MB per cleaner thread.")


def check_change(current: CleanerSettings, new: CleanerSettings) -> None:
    """Kafka's LogCleaner.validateReconfiguration: the worker count in steps of at most x2 or /2."""
    check(new)
    if new.threads < current.threads // 2:
        raise InvalidCleanerValue(
            f"Log cleaner threads cannot be reduced to less than half the current value {current.threads}")
    if new.threads > current.threads * 2:
        raise InvalidCleanerValue(
            f"Log cleaner threads cannot be increased to more than double the current value {current.threads}")


def replace(settings: CleanerSettings, **changes) -> CleanerSettings:
    return dataclasses.replace(settings, **changes)
