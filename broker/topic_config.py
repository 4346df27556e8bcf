"""Topic-level configuration: every key a topic may set, with its Kafka type, the broker keys it
falls back to (its synonyms), a validator and its documentation.

Only keys whose setting is in force are here. A key Flotilla does not implement is refused
(INVALID_CONFIG naming it) rather than stored and ignored; a few keys are accepted only with the
value that describes what the broker does (`preallocate=false`, `segment.jitter.ms=0`, ...).
DescribeConfigs and CreateTopics answer from `describe`, so what they report is what applies:
the topic's own value (DYNAMIC_TOPIC_CONFIG), else the broker's setting (STATIC_BROKER_CONFIG),
else the default (DEFAULT_CONFIG), as Kafka reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from broker.config import BrokerConfig

# DescribeConfigs config types and sources (Kafka's ConfigType and ConfigSource).
BOOLEAN, STRING, INT, SHORT, LONG, DOUBLE, LIST = 1, 2, 3, 4, 5, 6, 7
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5
LONG_MAX = 2**63 - 1


def _long(minimum: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        n = int(value.strip())
        if n < minimum:
            raise ValueError(f"value must be at least {minimum}")
        if n > LONG_MAX:
            raise ValueError("value does not fit in a long")
        return n

    return parse


def _int(minimum: int) -> Callable[[str], int]:
    long_parse = _long(minimum)

    def parse(value: str) -> int:
        n = long_parse(value)
        if n > 2**31 - 1:
            raise ValueError("value does not fit in an int")
        return n

    return parse


def _one_of(*allowed: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return value

    return parse


def _cleanup_policy(value: str) -> str:
    parts = sorted(p.strip() for p in value.split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts) or len(set(parts)) != len(parts):
        raise ValueError("must be delete, compact or compact,delete")
    return ",".join(parts)


def _ratio(value: str) -> float:
    r = float(value.strip())
    if not 0 <= r <= 1:
        raise ValueError("must be between 0 and 1")
    return r


def _compression(value: str) -> str:
    if value != "producer":
        raise ValueError("only 'producer' is supported: the broker keeps batches as the producer compressed them "
                         "(no recompression)")
    return value


def _only(fixed: str, why: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        if value.strip().lower() != fixed:
            raise ValueError(f"only {fixed} is supported: {why}")
        return fixed

    return parse


ALL = "*"  # every replica of the topic (leader/follower.replication.throttled.replicas)


def parse_replicas(value: str) -> list[tuple[int, int]] | str:
    """`*`, or the (partition, broker) pairs of `p:b,p:b`; ValueError naming a bad entry."""
    value = value.strip()
    if value == ALL:
        return ALL
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        p, sep, b = item.partition(":")
        try:
            if not sep:
                raise ValueError
            out.append((int(p), int(b)))
        except ValueError:
            raise ValueError(f"{item!r} is not partition:broker (a list of them, or *)") from None
        if out[-1][0] < 0 or out[-1][1] < 0:
            raise ValueError(f"{item!r}: partition and broker ids are not negative")
    return out


def _throttled_replicas(value: str) -> str:
    """`*` or `partition:broker,...` (quotas/replication_quota.py reads it), normalised."""
    parsed = parse_replicas(value)
    return ALL if parsed == ALL else ",".join(f"{p}:{b}" for p, b in parsed)


@dataclass(frozen=True)
class TopicKey:
    name: str
    type: int
    parse: Callable[[str], Any]
    doc: str
    synonyms: tuple[str, ...] = ()  # broker keys, the first one set wins
    fixed_default: str | None = None  # for keys without a broker key


KEYS: tuple[TopicKey, ...] = (
    TopicKey("cleanup.policy", LIST, _cleanup_policy,
             "delete: remove old segments by retention.ms/retention.bytes; compact: keep the latest record "
             "of each key (the log cleaner); both: compact and apply retention.", ("log.cleanup.policy",)),
    TopicKey("compression.type", STRING, _compression,
             "Compression of stored batches; 'producer' keeps what the producer sent.", ("compression.type",)),
    TopicKey("delete.retention.ms", LONG, _long(0),
             "How long a compacted topic keeps tombstones (null values) after the cleaner first sees them.",
             ("log.cleaner.delete.retention.ms",)),
    TopicKey("flush.messages", LONG, _long(1), "fsync the log after this many messages.",
             ("log.flush.interval.messages",)),
    TopicKey("flush.ms", LONG, _long(0), "fsync the log when its oldest unflushed write is this old.",
             ("log.flush.interval.ms",), fixed_default=str(LONG_MAX)),
    TopicKey("index.interval.bytes", INT, _int(0), "Bytes of log between two entries of the offset and time indexes.",
             ("log.index.interval.bytes",)),
    TopicKey("max.compaction.lag.ms", LONG, _long(1),
             "A record not compacted for this long makes its log due for cleaning.",
             ("log.cleaner.max.compaction.lag.ms",)),
    TopicKey("max.message.bytes", INT, _int(0), "Largest record batch the topic accepts.", ("message.max.bytes",)),
    TopicKey("message.timestamp.after.max.ms", LONG, _long(0),
             "How far in the future a CreateTime record's timestamp may be (else INVALID_TIMESTAMP).",
             ("log.message.timestamp.after.max.ms",)),
    TopicKey("message.timestamp.before.max.ms", LONG, _long(0),
             "How far in the past a CreateTime record's timestamp may be (else INVALID_TIMESTAMP).",
             ("log.message.timestamp.before.max.ms",)),
    TopicKey("message.timestamp.type", STRING, _one_of("CreateTime", "LogAppendTime"),
             "CreateTime keeps the producer's timestamps; LogAppendTime stamps each batch with the broker's "
             "time when it is appended.", ("log.message.timestamp.type",)),
    TopicKey("min.cleanable.dirty.ratio", DOUBLE, _ratio,
             "Clean a compacted log once this share of it has not been cleaned yet.",
             ("log.cleaner.min.cleanable.ratio",)),
    TopicKey("min.compaction.lag.ms", LONG, _long(0), "Records younger than this are not compacted.",
             ("log.cleaner.min.compaction.lag.ms",)),
    TopicKey("min.insync.replicas", INT, _int(1),
             "acks=all produce fails with NOT_ENOUGH_REPLICAS while fewer replicas than this are in sync.",
             ("min.insync.replicas",)),
    TopicKey("preallocate", BOOLEAN, _only("false", "segment files grow as they are written"),
             "Whether segment files are preallocated (they are not).", fixed_default="false"),
    TopicKey("retention.bytes", LONG, _long(-1), "Delete oldest segments while the partition is larger (-1: no limit).",
             ("log.retention.bytes",)),
    TopicKey("retention.ms", LONG, _long(-1), "Delete segments whose newest record is older (-1: keep forever).",
             ("log.retention.ms",)),
    TopicKey("segment.bytes", INT, _int(14), "Roll to a new segment file at this size.", ("log.segment.bytes",)),
    TopicKey("segment.jitter.ms", LONG, _only("0", "segments roll exactly at segment.ms"),
             "Random jitter subtracted from segment.ms (none).", fixed_default="0"),
    TopicKey("segment.ms", LONG, _long(1), "Roll to a new segment once the active one is this old.", ("log.roll.ms",)),
    TopicKey("unclean.leader.election.enable", BOOLEAN, _one_of("true", "false"),
             "Whether a live replica outside the ISR may become leader when no in-sync replica is alive "
             "(it loses what that replica lacks).", ("unclean.leader.election.enable",)),
    TopicKey("leader.replication.throttled.replicas", LIST, _throttled_replicas,
             "Replicas (partition:broker, or * for all) whose leader-side replication is throttled by "
             "leader.replication.throttled.rate on that broker (KIP-73).", fixed_default=""),
    TopicKey("follower.replication.throttled.replicas", LIST, _throttled_replicas,
             "Replicas (partition:broker, or * for all) whose follower fetching is throttled by "
             "follower.replication.throttled.rate on that broker (KIP-73).", fixed_default=""),
)
BY_NAME = {k.name: k for k in KEYS}


class TopicConfigError(ValueError):
    """A topic config key is unknown or unsupported, or its value is invalid; names the key."""

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


def validate(configs: dict[str, str | None]) -> dict[str, str]:
    """The topic's settings, normalised, or TopicConfigError naming the first bad key."""
    out = {}
    for name, value in configs.items():
        key = BY_NAME.get(name)
        if key is None:
            raise TopicConfigError(name, f"unknown or unsupported topic config {name!r}")
        if value is None:
            raise TopicConfigError(name, f"topic config {name!r} needs a value")
        try:
            parsed = key.parse(value)
        except (ValueError, TypeError) as e:
            raise TopicConfigError(name, f"invalid value {value!r} for topic config {name!r}: {e}") from None
        out[name] = value if not isinstance(parsed, str) else parsed
    return out


def _broker_value(config: BrokerConfig, broker_key: str) -> str | None:
    value = config[broker_key]
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class Entry:
    """One key as DescribeConfigs reports it."""

    name: str
    value: str | None
    source: int
    type: int
    doc: str
    synonyms: tuple[tuple[str, str | None, int], ...]  # (name, value, source), highest precedence first


def _valid(key: TopicKey, value: str | None) -> bool:
    try:
        key.parse(value)  # type: ignore[arg-type]
        return True
    except (ValueError, TypeError, AttributeError):
        return False


def describe(config: BrokerConfig, topic_configs: dict[str, str]) -> list[Entry]:
    """Every topic key with the value in force and where it comes from. A stored value that does
    not validate (a KafkaTopic written with kubectl is not checked by CreateTopics) is not in
    force, so it is neither applied nor reported."""
    raw = config["__raw__"]
    out = []
    for key in KEYS:
        synonyms: list[tuple[str, str | None, int]] = []
        if key.name in topic_configs and _valid(key, topic_configs[key.name]):
            synonyms.append((key.name, topic_configs[key.name], DYNAMIC_TOPIC_CONFIG))
        for broker_key in key.synonyms:
            if broker_key in raw:
                synonyms.append((broker_key, _broker_value(config, broker_key), STATIC_BROKER_CONFIG))
        for broker_key in key.synonyms:
            if broker_key not in raw:
                default = _broker_value(config, broker_key)
                if default is not None:
                    synonyms.append((broker_key, default, DEFAULT_CONFIG))
        if synonyms:
            value, source = synonyms[0][1], synonyms[0][2]
        else:
            value, source = key.fixed_default, DEFAULT_CONFIG
        out.append(Entry(key.name, value, source, key.type, key.doc, tuple(synonyms)))
    return out


def in_force(config: BrokerConfig, topic_configs: dict[str, str]) -> dict[str, str]:
    """name -> the value that applies to the topic."""
    return {e.name: (e.value if e.value is not None else BY_NAME[e.name].fixed_default) for e in describe(config, topic_configs)}
