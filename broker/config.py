"""Broker settings under Apache Kafka's own key names, so users bring what they already know.

Every key is declared once in `KEYS` with its type, default and a docstring. A properties file
and `--override key=value` pairs are merged and validated here; an unknown key or a bad value
stops start-up with a message that names the key (`ConfigError`).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping
from urllib.parse import urlsplit

from broker.log import cleaner_settings


class ConfigError(ValueError):
    """A configuration key is unknown or its value is invalid; the message names the key."""


@dataclass(frozen=True)
class Listener:
    """One `NAME://host:port` entry of `listeners` / `advertised.listeners`."""

    name: str
    host: str
    port: int


def _parse_listeners(value: str) -> tuple[Listener, ...]:
    out = []
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        if "://" not in item:
            raise ValueError(f"{item!r} is not of the form NAME://host:port")
        name, rest = item.split("://", 1)
        parts = urlsplit("//" + rest)
        if parts.port is None:
            raise ValueError(f"{item!r} has no port")
        out.append(Listener(name=name.upper(), host=parts.hostname or "", port=parts.port))
    if not out:
        raise ValueError("no listener given")
    return tuple(out)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _parse_protocol_map(value: str) -> dict[str, str]:
    out = {}
    for item in (v.strip() for v in value.split(",") if v.strip()):
        name, sep, proto = item.partition(":")
        if not sep:
            raise ValueError(f"{item!r} is not NAME:PROTOCOL")
        proto = proto.strip().upper()
        if proto not in SECURITY_PROTOCOLS:
            raise ValueError(f"security protocol {proto} is not one of {', '.join(SECURITY_PROTOCOLS)}")
        out[name.strip().upper()] = proto
    return out


def _parse_host_port(value: str) -> tuple[str, int] | None:
    value = value.strip()
    if not value:
        return None
    host, _, port = value.rpartition(":")
    if not port.isdigit():
        raise ValueError(f"{value!r} is not host:port")
    return host or "0.0.0.0", int(port)


def _parse_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "1", "yes"):
        return True
    if v in ("false", "0", "no"):
        return False
    raise ValueError(f"{value!r} is not true or false")


def _mechanisms(value: str) -> tuple[str, ...]:
    return tuple(m.strip().upper() for m in value.split(",") if m.strip())


def _upper(value: str) -> str:
    return value.strip().upper()


def _mapping_rules(value: str) -> str:
    from broker.security.principal import PrincipalMapper

    PrincipalMapper(value)  # raises ValueError naming the bad rule
    return value


def _int_at_least(minimum: int) -> Callable[[str], int]:
    def parse(value: str) -> int:
        n = int(value.strip())
        if n < minimum:
            raise ValueError(f"{n} is below the minimum {minimum}")
        return n

    return parse


def _authorizer(value: str) -> str:
    from broker.security.authorizer import STANDARD_AUTHORIZER

    value = value.strip()
    if value not in ("", STANDARD_AUTHORIZER):
        raise ValueError(f"only {STANDARD_AUTHORIZER} (or empty) is supported")
    return value


def _principals(value: str) -> frozenset[str]:
    out = frozenset(p.strip() for p in value.split(";") if p.strip())
    for p in out:
        if ":" not in p or p.startswith(":"):
            raise ValueError(f"{p!r} is not a principal (type:name, e.g. User:admin)")
    return out


def _retention(value: str) -> int:
    n = int(value.strip())
    if n < -1:
        raise ValueError(f"{n} must be -1 (unlimited) or positive")
    return n


def _dirs(value: str) -> tuple[Path, ...]:
    dirs = tuple(Path(v.strip()).expanduser() for v in value.split(",") if v.strip())
    if not dirs:
        raise ValueError("no directory given")
    return dirs


def _cleanup_policy(value: str) -> str:
    parts = sorted(p.strip() for p in value.split(",") if p.strip())
    if not parts or any(p not in ("delete", "compact") for p in parts) or len(set(parts)) != len(parts):
        raise ValueError("must be delete, compact or compact,delete")
    return ",".join(parts)


def _timestamp_type(value: str) -> str:
    if value.strip() not in ("CreateTime", "LogAppendTime"):
        raise ValueError("must be CreateTime or LogAppendTime")
    return value.strip()


def _ratio(value: str) -> float:
    r = float(value.strip())
    if not 0 <= r <= 1:
        raise ValueError(f"{r} is not between 0 and 1")
    return r


def _compression(value: str) -> str:
    v = value.strip().lower()
    if v != "producer":
        raise ValueError("only 'producer' is supported: the broker stores batches as clients send them")
    return v


def _metadata_store(value: str) -> str:
    v = value.strip().lower()
    if v not in ("file", "kubernetes"):
        raise ValueError("must be 'file' or 'kubernetes'")
    return v


def _cluster_name(value: str) -> str:
    """A DNS-1123 label (it prefixes Kubernetes object names and is a label value)."""
    v = value.strip()
    if v and not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?", v):
        raise ValueError("must be lowercase letters, digits and '-', start and end alphanumeric, "
                         "at most 40 characters")
    return v


REPLICA_SELECTORS = ("org.apache.kafka.common.replica.RackAwareReplicaSelector",
                     "org.apache.kafka.common.replica.LeaderSelector")  # broker/replica/replica_selector.py


def _replica_selector(value: str) -> str:
    """replica.selector.class: empty (none, Kafka's default) or one of Kafka's own selector classes."""
    v = value.strip()
    if v and v not in REPLICA_SELECTORS:
        raise ValueError(f"unknown replica selector class; Flotilla serves {' and '.join(REPLICA_SELECTORS)} "
                         "(or empty: consumers always read from the leader)")
    return v


def _optional_positive(whole: bool) -> Callable[[str], float | None]:
    def parse(value: str) -> float | None:
        if not value.strip():
            return None
        v = float(value)
        if not v > 0 or v == float("inf"):
            raise ValueError(f"{value!r} is not a positive number")
        if whole and v != int(v):
            raise ValueError(f"{value!r} is not a whole number of bytes per second")
        return v
    return parse


@dataclass(frozen=True)
class Key:
    """Declaration of one configuration key."""

    name: str
    default: str
    parse: Callable[[str], Any]
    doc: str


KEYS: tuple[Key, ...] = (
    Key("node.id", "1", _int_at_least(0), "Unique id of this broker in the cluster."),
    Key("cluster.id", "", str, "Cluster id; generated and stored in meta.properties when empty."),
    Key("listeners", "PLAINTEXT://127.0.0.1:9092", _parse_listeners,
        "Addresses the broker binds, as NAME://host:port (comma separated)."),
    Key("advertised.listeners", "", lambda v: _parse_listeners(v) if v.strip() else (),
        "Addresses given to clients in Metadata; defaults to `listeners`."),
    Key("listener.security.protocol.map",
        "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL", _parse_protocol_map,
        "Security protocol of each listener name, NAME:PROTOCOL (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); "
        "see docs/security.md."),
    # -- listener security (broker/security/, docs/security.md). The ssl.* keys and
    # sasl.enabled.mechanisms may also be given per listener as listener.name.<name>.<key>.
    Key("sasl.enabled.mechanisms", "GSSAPI", _mechanisms,
        "SASL mechanisms SASL listeners offer: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (GSSAPI, Kafka's "
        "default, and OAUTHBEARER are not served: a SASL listener needs this set)."),
    Key("sasl.server.max.receive.size", "524288", _int_at_least(1),
        "Largest frame a SASL listener reads before the client has authenticated."),
    Key("connection.failed.authentication.delay.ms", "100", _int_at_least(0),
        "How long the broker waits before answering a failed authentication and closing the connection."),
    Key("connections.max.reauth.ms", "0", _int_at_least(0),
        "KIP-368: how long a SASL authentication lasts (0: for the connection's life). Clients are told "
        "in SaslAuthenticate's session_lifetime_ms and must re-authenticate before it ends; a request "
        "after that closes the connection."),
    Key("flotilla.sasl.scram.credentials.file", "", str.strip,
        "File of static SCRAM credentials, one per line in kafka-storage's --add-scram syntax: "
        "SCRAM-SHA-512=[name=alice,password=...] or [name=...,salt=...,saltedpassword=...,iterations=...]. "
        "Credentials stored through AlterUserScramCredentials (kafka-configs --entity-type users) win over these."),
    Key("ssl.keystore.type", "JKS", _upper,
        "Keystore format: PEM or PKCS12 (JKS, Kafka's default, is refused: convert it)."),
    Key("ssl.keystore.location", "", str.strip, "Keystore file (PEM: private key and certificate chain in one file)."),
    Key("ssl.keystore.password", "", str, "Password of a PKCS12 keystore."),
    Key("ssl.key.password", "", str, "Password of the private key (encrypted PEM key)."),
    Key("ssl.keystore.certificate.chain", "", str,
        "The certificate chain in PEM, inline (with ssl.keystore.type=PEM and ssl.keystore.key)."),
    Key("ssl.keystore.key", "", str, "The private key in PEM, inline (with ssl.keystore.certificate.chain)."),
    Key("ssl.truststore.type", "JKS", _upper, "Truststore format: PEM or PKCS12."),
    Key("ssl.truststore.location", "", str.strip, "Truststore file: the CAs client certificates must chain to."),
    Key("ssl.truststore.password", "", str, "Password of a PKCS12 truststore."),
    Key("ssl.truststore.certificates", "", str, "Trusted CA certificates in PEM, inline (ssl.truststore.type=PEM)."),
    Key("ssl.client.auth", "none", lambda v: v.strip().lower(),
        "Client certificates on SSL listeners: none, requested or required (mTLS). On SASL_SSL listeners "
        "only the listener.name.<name>.ssl.client.auth form counts, as in Kafka (KIP-684)."),
    Key("ssl.enabled.protocols", "TLSv1.2,TLSv1.3", str, "TLS versions the broker accepts."),
    Key("ssl.protocol", "TLSv1.3", str.strip, "Accepted for compatibility; ssl.enabled.protocols decides."),
    Key("ssl.endpoint.identification.algorithm", "https", str.strip,
        "Accepted for compatibility (a client-side check)."),
    Key("ssl.principal.mapping.rules", "DEFAULT", _mapping_rules,
        "How a client certificate's subject becomes the principal's name: DEFAULT (the whole DN) or "
        "RULE:pattern/replacement/[LU] rules, the first matching one applies."),
    Key("inter.broker.listener.name", "", lambda v: v.strip().upper(),
        "Listener brokers reach each other on (replication, transaction markers). Default, as Kafka: "
        "the listener named by security.inter.broker.protocol (PLAINTEXT); Flotilla falls back to "
        "the first listener when no listener has that name and neither key is set (Kafka refuses)."),
    Key("security.inter.broker.protocol", "", lambda v: v.strip().upper(),
        "Security protocol of the inter-broker listener, naming it (Kafka's default PLAINTEXT); set "
        "this or inter.broker.listener.name, not both."),
    Key("sasl.mechanism.inter.broker.protocol", "GSSAPI", _upper,
        "SASL mechanism a broker authenticates with on a SASL inter-broker listener: PLAIN, "
        "SCRAM-SHA-256 or SCRAM-SHA-512 (Kafka's default GSSAPI is not served). The broker's own "
        "credentials are the username=/password= options of listener.name.<l>.<mechanism>.sasl.jaas.config."),
    Key("broker.rack", "", str.strip,
        "Rack (or zone) of this broker; the controller spreads a partition's replicas over racks."),
    Key("log.dirs", "./data", _dirs, "Directories holding partition logs and checkpoint files."),
    Key("num.partitions", "1", _int_at_least(1), "Partitions of an auto-created topic."),
    Key("flotilla.max.partitions", "50000", _int_at_least(1),
        "Most partitions the cluster may hold (all topics, internal ones included); CreateTopics and "
        "CreatePartitions beyond it answer INVALID_PARTITIONS naming this key. Apache Kafka has no such "
        "cap; each partition costs this broker about three file descriptors and some memory, and "
        "requests that this broker's open-file limit cannot serve are refused too."),
    Key("default.replication.factor", "1", _int_at_least(1),
        "Replication factor of auto-created topics (a single broker serves factor 1)."),
    Key("auto.create.topics.enable", "true", _parse_bool,
        "Create a topic when a client asks for an unknown one in Metadata."),
    Key("delete.topic.enable", "true", _parse_bool, "Whether DeleteTopics may delete topics."),
    Key("max.request.partition.size.limit", "2000", _int_at_least(1),
        "The most partitions one DescribeTopicPartitions answer holds (KIP-966); more follow by its cursor."),
    Key("log.segment.bytes", str(1024 ** 3), _int_at_least(14),
        "Roll to a new segment file when the active one would exceed this size."),
    Key("log.roll.ms", str(7 * 24 * 3600 * 1000), _int_at_least(1),
        "Roll to a new segment once the active one is this old."),
    Key("log.retention.ms", str(7 * 24 * 3600 * 1000), _retention,
        "Delete segments whose newest record is older than this (-1: keep forever)."),
    Key("log.retention.bytes", "-1", _retention,
        "Delete oldest segments while a partition is larger than this (-1: unlimited)."),
    Key("log.retention.check.interval.ms", "300000", _int_at_least(1),
        "How often retention runs."),
    Key("log.cleanup.policy", "delete", _cleanup_policy,
        "Default cleanup.policy of topics: delete (retention), compact (the log cleaner), or both."),
    Key("log.cleaner.enable", "true", _parse_bool,
        "Run the log cleaner, which compacts topics whose cleanup.policy includes compact."),
    *(Key(k.name, k.default, cleaner_settings.parser(k.name), k.doc + " Dynamic (docs/admin-apis.md).")
      for k in cleaner_settings.KEYS),
    Key("log.cleaner.min.cleanable.ratio", "0.5", _ratio,
        "Default min.cleanable.dirty.ratio: clean a log once this share of it is dirty."),
    Key("log.cleaner.delete.retention.ms", "86400000", _int_at_least(0),
        "Default delete.retention.ms: how long a compacted topic keeps tombstones."),
    Key("log.cleaner.min.compaction.lag.ms", "0", _int_at_least(0),
        "Default min.compaction.lag.ms: records younger than this are not compacted."),
    Key("log.cleaner.max.compaction.lag.ms", str(2**63 - 1), _int_at_least(1),
        "Default max.compaction.lag.ms: a dirty record older than this makes its log due for cleaning."),
    Key("log.message.timestamp.type", "CreateTime", _timestamp_type,
        "Default message.timestamp.type: CreateTime (the producer's) or LogAppendTime (the broker's clock)."),
    Key("log.message.timestamp.before.max.ms", str(2**63 - 1), _int_at_least(0),
        "Default message.timestamp.before.max.ms: oldest CreateTime timestamp accepted, relative to now."),
    Key("log.message.timestamp.after.max.ms", "3600000", _int_at_least(0),
        "Default message.timestamp.after.max.ms: newest CreateTime timestamp accepted, relative to now."),
    Key("min.insync.replicas", "1", _int_at_least(1),
        "Default min.insync.replicas: acks=all needs at least this many in-sync replicas."),
    Key("replica.lag.time.max.ms", "30000", _int_at_least(1),
        "A follower that has not caught up with its leader for this long leaves the ISR."),
    Key("replica.fetch.wait.max.ms", "500", _int_at_least(0),
        "How long a follower's fetch waits at the leader for new records."),
    Key("replica.fetch.max.bytes", str(1024 * 1024), _int_at_least(1),
        "Bytes a follower asks for per partition in one fetch (at least one batch is returned)."),
    Key("replica.fetch.response.max.bytes", str(10 * 1024 * 1024), _int_at_least(0),
        "Bytes a follower asks for in one fetch over all its partitions."),
    Key("replica.fetch.backoff.ms", "1000", _int_at_least(0),
        "How long a replica fetcher waits after its leader could not be reached or answered an error."),
    Key("replica.selector.class", "", _replica_selector,
        "KIP-392: how a partition's leader picks the replica a consumer (Fetch v11+) should read from. "
        "org.apache.kafka.common.replica.RackAwareReplicaSelector: an in-sync replica in the consumer's "
        "client.rack when the leader is not in it; org.apache.kafka.common.replica.LeaderSelector or "
        "empty (the default): the leader. Followers serve consumer fetches up to their high watermark "
        "whatever this says (docs/replication.md)."),
    Key("auto.leader.rebalance.enable", "true", _parse_bool,
        "Every leader.imbalance.check.interval.seconds the controller moves leadership back to the "
        "preferred replica (the first of each partition) wherever that replica is live and in the ISR."),
    Key("leader.imbalance.check.interval.seconds", "300", _int_at_least(1),
        "How often the controller checks for partitions not led by their preferred replica."),
    Key("leader.imbalance.per.broker.percentage", "10", _int_at_least(0),
        "Accepted for compatibility; as in Kafka 4.1's KRaft controller, no threshold gates the "
        "rebalance: every partition whose preferred replica can lead again is moved back."),
    Key("unclean.leader.election.enable", "false", _parse_bool,
        "Default unclean.leader.election.enable: whether a live replica outside the ISR may become leader "
        "when no in-sync replica is alive (losing what it lacks)."),
    Key("log.flush.interval.messages", str(2 ** 63 - 1), _int_at_least(1),
        "fsync a partition after this many messages (default: leave it to the OS, as Kafka does)."),
    Key("log.flush.interval.ms", "", lambda v: int(v) if v.strip() else None,
        "fsync a partition when its oldest unflushed write is this old (empty: never by time)."),
    Key("log.index.interval.bytes", "4096", _int_at_least(0),
        "Bytes of log between two entries of the sparse offset and time indexes."),
    Key("message.max.bytes", str(1048588), _int_at_least(0),
        "Largest record batch the broker accepts."),
    Key("socket.request.max.bytes", str(100 * 1024 * 1024), _int_at_least(1),
        "Largest request frame; a larger length prefix closes the connection."),
    Key("connections.max.idle.ms", "600000", _int_at_least(1),
        "Close connections idle for longer than this."),
    Key("queued.max.request.bytes", "-1", int,
        "Request bytes all connections may hold in memory at once; past it the broker stops reading "
        "(back-pressure) until requests are handled. One frame may overshoot it, as in Kafka; -1 (or 0): no bound."),
    Key("compression.type", "producer", _compression,
        "Broker-side compression; 'producer' keeps batches as the client compressed them."),
    Key("group.initial.rebalance.delay.ms", "3000", _int_at_least(0),
        "Wait this long for more members before the first rebalance of an empty group."),
    Key("group.min.session.timeout.ms", "6000", _int_at_least(1),
        "Smallest session timeout a consumer may ask for."),
    Key("group.max.session.timeout.ms", "1800000", _int_at_least(1),
        "Largest session timeout a consumer may ask for."),
    Key("offsets.topic.num.partitions", "50", _int_at_least(1),
        "Partitions of the internal __consumer_offsets topic."),
    Key("offsets.topic.replication.factor", "1", _int_at_least(1),
        "Replication factor of __consumer_offsets. While fewer brokers are alive, FindCoordinator answers "
        "COORDINATOR_NOT_AVAILABLE and the topic is not created, as in Kafka (whose default is 3; Flotilla's "
        "is 1 so that a single broker serves groups without configuration)."),
    Key("offsets.topic.segment.bytes", str(100 * 1024 * 1024), _int_at_least(1),
        "Segment size of __consumer_offsets: small, so the log cleaner can compact it soon."),
    Key("offsets.commit.timeout.ms", "5000", _int_at_least(1),
        "An offset commit waits this long for the in-sync replicas of its __consumer_offsets partition "
        "(as acks=all) before it answers REQUEST_TIMED_OUT."),
    Key("transaction.state.log.num.partitions", "50", _int_at_least(1),
        "Partitions of the internal __transaction_state topic (transaction coordinator shards)."),
    Key("transaction.state.log.replication.factor", "1", _int_at_least(1),
        "Replication factor of __transaction_state; while fewer brokers are alive FindCoordinator "
        "answers COORDINATOR_NOT_AVAILABLE (Kafka's default is 3; Flotilla's 1, as for __consumer_offsets)."),
    Key("transaction.state.log.min.isr", "1", _int_at_least(1),
        "min.insync.replicas of __transaction_state (Kafka's default is 2)."),
    Key("transaction.state.log.segment.bytes", str(100 * 1024 * 1024), _int_at_least(1),
        "Segment size of __transaction_state: small, so the log cleaner compacts it soon."),
    Key("transaction.max.timeout.ms", "900000", _int_at_least(1),
        "Largest transaction.timeout.ms a producer may ask for; InitProducerId with more answers "
        "INVALID_TRANSACTION_TIMEOUT."),
    Key("transactional.id.expiration.ms", "604800000", _int_at_least(1),
        "A transactional id with no transaction for this long is forgotten (tombstoned)."),
    Key("transaction.abort.timed.out.transaction.cleanup.interval.ms", "10000", _int_at_least(1),
        "How often the coordinator looks for transactions older than their timeout and aborts them."),
    Key("transaction.remove.expired.transaction.cleanup.interval.ms", "3600000", _int_at_least(1),
        "How often the coordinator forgets transactional ids past transactional.id.expiration.ms."),
    Key("offsets.retention.minutes", "10080", _int_at_least(1),
        "Keep committed offsets of empty groups this long."),
    Key("offsets.retention.check.interval.ms", "600000", _int_at_least(1),
        "How often committed offsets of empty groups are checked against offsets.retention.minutes "
        "and the expired ones removed."),
    Key("producer.id.expiration.ms", "86400000", _int_at_least(1),
        "Forget an idempotent producer's state once its newest batch's timestamp is this old."),
    Key("producer.id.expiration.check.interval.ms", "600000", _int_at_least(1),
        "How often idle producers are looked for and expired (producer.id.expiration.ms)."),
    Key("transaction.partition.verification.enable", "true", _parse_bool,
        "KIP-890 part 1: a producer's first transactional batch on a partition is checked with the "
        "transaction coordinator (the partition must be in its ongoing transaction) before it is appended."),
    Key("max.incremental.fetch.session.cache.slots", "1000", _int_at_least(0),
        "Incremental fetch sessions (KIP-227) the broker keeps; a full cache answers new fetchers "
        "sessionless unless a session may be evicted."),
    Key("flotilla.fetch.session.eviction.ms", "120000", _int_at_least(0),
        "A fetch session unused this long may be evicted for a new one, and one older than this may "
        "be evicted by a bigger one (KIP-227's minimum eviction time, a constant in Kafka)."),
    Key("flotilla.controlled.shutdown.timeout.ms", "30000", _int_at_least(0),
        "On SIGTERM, how long a broker of a fleet waits for the controller to move the leadership "
        "of the partitions it leads to other in-sync replicas (Kafka's controlled shutdown) before "
        "it stops anyway; keep it well below the pod's termination grace period. 0: no hand-over."),
    Key("quota.window.num", "11", _int_at_least(1),
        "Samples a client quota's rate is measured over (KIP-13; Kafka's default)."),
    Key("quota.window.size.seconds", "1", _int_at_least(1),
        "Length of each quota sample; a throttle is at most about num x size long."),
    Key("flotilla.quota.producer.byte.rate.default", "", _optional_positive(whole=True),
        "Produce bytes/s each client-id may send unless a dynamic quota says otherwise (empty: "
        "unlimited); the static form of the client-id <default> entity (Kafka 3 removed quota.producer.default)."),
    Key("flotilla.quota.consumer.byte.rate.default", "", _optional_positive(whole=True),
        "Fetch bytes/s each client-id may receive unless a dynamic quota says otherwise (empty: unlimited)."),
    Key("flotilla.quota.request.percentage.default", "", _optional_positive(whole=False),
        "Percent of the broker's event loop each client-id may use handling its requests (KIP-124; "
        "empty: unlimited)."),
    Key("flotilla.quota.metrics.max.client.ids", "100", _int_at_least(0),
        "Client-ids (or users) named by a quota that get their own Prometheus label; others are "
        "counted under client_id=\"<other>\" (clients governed only by a default: \"<default>\")."),
    Key("flotilla.transaction.metrics.max.partitions", "20", _int_at_least(0),
        "Partitions with an open transaction that get their own flotilla_partition_lso_lag_offsets "
        "series: those with the largest lag (all of them are counted by flotilla_partitions_with_open_transactions)."),
    # -- authorization (broker/security/authorizer.py, docs/security.md "ACLs")
    Key("authorizer.class.name", "", _authorizer,
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on (Kafka's KRaft authorizer; "
        "empty: every request is allowed)."),
    Key("super.users", "", _principals,
        "Principals allowed everything whatever the ACLs say, semicolon separated (User:admin;User:ANONYMOUS)."),
    Key("allow.everyone.if.no.acl.found", "false", _parse_bool,
        "Whether a resource that has no ACL at all is open to everyone (else only to super users)."),
    Key("flotilla.metrics.listener", "127.0.0.1:9404", _parse_host_port,
        "host:port of the HTTP endpoint serving Prometheus /metrics and /healthz (empty: off)."),
    Key("flotilla.metadata.store", "file", _metadata_store,
        "Where cluster metadata lives: 'file' (one broker, a JSON file in the first log dir) or "
        "'kubernetes' (Leases and KafkaTopic resources; brokers of one KafkaCluster form one cluster)."),
    Key("flotilla.cluster.name", "", _cluster_name,
        "Name of the KafkaCluster; Kubernetes metadata objects are named and labelled after it "
        "(required with flotilla.metadata.store=kubernetes)."),
    Key("flotilla.cluster.uid", "", str.strip,
        "uid of the KafkaCluster resource (set by the operator): the Leases and KafkaTopics the brokers "
        "create name it as their owner, so deleting the KafkaCluster deletes them (empty: no owner)."),
    Key("flotilla.kubernetes.namespace", "", str.strip,
        "Namespace of the metadata objects (empty: the pod's own namespace, or the kubeconfig "
        "context's outside a pod)."),
    Key("flotilla.metadata.lease.duration.ms", "15000", _int_at_least(1000),
        "How long a broker's or the controller's Lease stays valid without renewal (whole seconds "
        "on the Lease); a killed broker drops out of the cluster after about this long."),
)
_BY_NAME = {k.name: k for k in KEYS}
# Keys that may also be set for one listener, as listener.name.<listener>.<key> (Kafka's form).
PER_LISTENER_KEYS = frozenset(k.name for k in KEYS if k.name.startswith("ssl.")) | {"sasl.enabled.mechanisms"}
_LISTENER_KEY = re.compile(r"listener\.name\.([^.]+)\.(.+)")
_JAAS_KEY = re.compile(r"(plain|scram-sha-256|scram-sha-512)\.sasl\.jaas\.config")


def _listener_key(key: str) -> tuple[str, str] | None:
    """(LISTENER, key) of a listener.name.<listener>.<key> setting Flotilla knows, else None."""
    m = _LISTENER_KEY.fullmatch(key)
    if m is None or not (m.group(2) in PER_LISTENER_KEYS or _JAAS_KEY.fullmatch(m.group(2))):
        return None
    return m.group(1).upper(), m.group(2)


def _parse_listener_value(key: str, text: str) -> Any:
    if key in _BY_NAME:
        return _BY_NAME[key].parse(text)
    from broker.security import jaas

    return jaas.parse(text)


@dataclass(frozen=True)
class BrokerConfig:
    """Validated broker settings; attribute names are the Kafka keys with dots as underscores."""

    values: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    @property
    def node_id(self) -> int:
        return self.values["node.id"]

    @property
    def listeners(self) -> tuple[Listener, ...]:
        return self.values["listeners"]

    @property
    def advertised_listeners(self) -> tuple[Listener, ...]:
        adv = self.values["advertised.listeners"]
        if adv:
            return adv
        return tuple(
            dataclasses.replace(l, host=l.host if l.host not in ("", "0.0.0.0", "::") else "127.0.0.1")
            for l in self.listeners
        )

    @property
    def log_dirs(self) -> tuple[Path, ...]:
        return self.values["log.dirs"]

    def listener_value(self, listener: str, key: str, default: Any = None) -> Any:
        """`listener.name.<listener>.<key>` if set, else the broker-wide `key` (else `default`)."""
        per_listener = self.values.get("listener.name", {}).get(listener.upper(), {})
        if key in per_listener:
            return per_listener[key]
        return self.values.get(key, default)

    def protocol_of(self, listener: str) -> str:
        """The security protocol of a listener name (listener.security.protocol.map)."""
        return self.values["listener.security.protocol.map"].get(listener.upper(), "PLAINTEXT")


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties subset: `key=value` or `key: value`, # and ! comments, blank lines, and a
    trailing backslash continuing a value on the next line (inline PEM keys are written so)."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    joined: list[tuple[int, str]] = []
    i = 0
    while i < len(lines):
        start, line = i + 1, lines[i]
        while line.endswith("\\") and not line.endswith("\\\\") and i + 1 < len(lines) \
                and not line.lstrip().startswith(("#", "!")):
            i += 1
            line = line[:-1] + lines[i].lstrip()
        joined.append((start, line))
        i += 1
    for lineno, line in joined:
        s = line.strip()
        if not s or s[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in s:
                k, v = s.split(sep, 1)
                out[k.strip()] = v.strip()
                break
        else:
            raise ConfigError(f"line {lineno}: {s!r} is not key=value")
    return out


def parse_override(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError(f"--override {item!r}: expected key=value")
    k, v = item.split("=", 1)
    return k.strip(), v


def parse_config(raw: Mapping[str, str]) -> BrokerConfig:
    """Validate `raw` (key -> string value) into a BrokerConfig, or raise ConfigError naming the key."""
    unknown = sorted(k for k in raw if k not in _BY_NAME and _listener_key(k) is None)
    if unknown:
        raise ConfigError(
            f"unknown configuration key {unknown[0]!r}"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else "")
        )
    values: dict[str, Any] = {}
    for key in KEYS:
        text = raw.get(key.name, key.default)
        try:
            values[key.name] = key.parse(text)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"invalid value {text!r} for configuration key {key.name!r}: {e}") from None
    per_listener: dict[str, dict[str, Any]] = {}
    for name, text in raw.items():
        lk = _listener_key(name)
        if lk is None:
            continue
        try:
            per_listener.setdefault(lk[0], {})[lk[1]] = _parse_listener_value(lk[1], text)
        except (ValueError, TypeError) as e:
            raise ConfigError(f"invalid value for configuration key {name!r}: {e}") from None
    values["listener.name"] = per_listener
    protocols = values["listener.security.protocol.map"]
    for key in ("listeners", "advertised.listeners"):
        for listener in values[key]:
            if listener.name not in protocols and listener.name != "PLAINTEXT":
                raise ConfigError(f"listener name {listener.name!r} in {key!r} has no entry in "
                                  f"'listener.security.protocol.map'")
    queued = values["queued.max.request.bytes"]
    if 0 < queued < values["socket.request.max.bytes"]:
        raise ConfigError(f"'queued.max.request.bytes' ({queued}) must be at least 'socket.request.max.bytes' "
                          f"({values['socket.request.max.bytes']}) or -1")
    if values["flotilla.metadata.store"] == "kubernetes" and not values["flotilla.cluster.name"]:
        raise ConfigError("'flotilla.cluster.name' is required when 'flotilla.metadata.store' is kubernetes")
    try:
        cleaner_settings.check(cleaner_settings.from_values({k.name: raw[k.name] for k in cleaner_settings.KEYS
                                                             if k.name in raw}))
    except cleaner_settings.InvalidCleanerValue as e:
        raise ConfigError(str(e)) from None
    values[INTER_BROKER_LISTENER] = _inter_broker_listener(raw, values)
    values["__raw__"] = dict(raw)
    return BrokerConfig(values=values)


INTER_BROKER_LISTENER = "__inter_broker_listener__"  # the resolved name, in BrokerConfig.values
INTER_BROKER_UNAUTHENTICATED = "__inter_broker_unauthenticated__"  # the lenient default: no SASL credentials
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _inter_broker_listener(raw: Mapping[str, str], values: dict[str, Any]) -> str:
    """The inter-broker listener's name, by Kafka's rules (KafkaConfig): inter.broker.listener.name,
    else the listener named after security.inter.broker.protocol; it must be advertised; a SASL one
    needs sasl.mechanism.inter.broker.protocol among its sasl.enabled.mechanisms."""
    name, protocol_key = values["inter.broker.listener.name"], values["security.inter.broker.protocol"]
    protocols = values["listener.security.protocol.map"]
    if name and "security.inter.broker.protocol" in raw:
        raise ConfigError("Only one of 'inter.broker.listener.name' and 'security.inter.broker.protocol' should be set")
    if protocol_key and protocol_key not in _PROTOCOLS:
        raise ConfigError(f"invalid value {protocol_key!r} for configuration key 'security.inter.broker.protocol': "
                          f"expected one of {', '.join(_PROTOCOLS)}")
    advertised = [l.name for l in (values["advertised.listeners"] or values["listeners"])]
    if name:
        if name not in protocols and name != "PLAINTEXT":
            raise ConfigError(f"listener with name {name} defined in 'inter.broker.listener.name' not found in "
                              "'listener.security.protocol.map'")
        key = "inter.broker.listener.name"
    else:
        name, key = protocol_key or "PLAINTEXT", "security.inter.broker.protocol"
        if name not in advertised and not protocol_key:
            # Flotilla's leniency, Kafka refuses (docs/security.md): the first listener, and on SASL
            # no credentials unless sasl.mechanism.inter.broker.protocol is set.
            name = values["listeners"][0].name
            if "sasl.mechanism.inter.broker.protocol" not in raw:
                values[INTER_BROKER_UNAUTHENTICATED] = True
                return name
    if name not in advertised:
        raise ConfigError(f"'{key}' {name}: the inter-broker listener must be a listener name defined in "
                          f"'advertised.listeners' (here: {', '.join(advertised)})")
    if protocols.get(name, "PLAINTEXT").startswith("SASL_"):
        mechanism = values["sasl.mechanism.inter.broker.protocol"]
        per_listener = values["listener.name"].get(name, {})
        enabled = per_listener.get("sasl.enabled.mechanisms", values["sasl.enabled.mechanisms"])
        if mechanism not in enabled:
            raise ConfigError(f"'sasl.mechanism.inter.broker.protocol' ({mechanism}) must be included in "
                              f"'sasl.enabled.mechanisms' of listener {name} ({','.join(enabled)}) when SASL is used "
                              "for inter-broker communication")
        if mechanism not in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            raise ConfigError(f"'sasl.mechanism.inter.broker.protocol' {mechanism} (Kafka's default is GSSAPI) is not "
                              "served: brokers authenticate to each other with PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512")
    return name


def load_config(path: str | Path | None, overrides: list[str]) -> BrokerConfig:
    raw: dict[str, str] = {}
    if path is not None:
        try:
            raw.update(parse_properties(Path(path).read_text()))
        except OSError as e:
            raise ConfigError(f"cannot read config file {path}: {e.strerror}") from None
    for item in overrides:
        k, v = parse_override(item)
        raw[k] = v
    return parse_config(raw)
