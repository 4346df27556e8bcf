"""The ConfigMap holding server.properties, the brokers' shared configuration (Kafka key names)."""

from __future__ import annotations

from typing import Any

from ..api.kafka_cluster import METRICS_PORT, KafkaClusterSpec, replication_settings
from .cluster_id import id_from_uid
from .certificates import (CA_FILE, CLIENTS_CA_FILE, FLEET_MAPPING_RULES, PRINCIPAL_MAPPING_RULES, TLS_DIR,
                           fleet_certificates, managed_listeners)
from .common import BROKER_USER, OPERATOR_USER, sasl_inter_broker

OPERATOR_PRINCIPAL = f"User:{OPERATOR_USER}"
BROKER_PRINCIPAL = f"User:{BROKER_USER}"
INTER_BROKER_MECHANISM = "SCRAM-SHA-512"
from .common import CONFIG_FILE, DATA_DIR, Owner, configmap_name, metadata


def _value(value: int | str) -> str:
    text = str(value)
    # java.util.Properties escapes: a value may not span lines.
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def kafka_cluster_id(owner: Owner) -> str:
    """A new fleet's cluster.id (from the uid); a running fleet's comes from its record
    (builders/cluster_id.py), passed to the builders as `cluster_id`."""
    return id_from_uid(owner)


def operator_config(owner: Owner, spec: KafkaClusterSpec, cluster_id: str | None = None) -> dict[str, str]:
    """The keys the operator owns and sets for every broker (per-pod keys are --override flags);
    `cluster_id` as chosen by builders/cluster_id.py (a new fleet's from the uid when None)."""
    listeners = spec.listeners
    config = {
        "cluster.id": cluster_id or kafka_cluster_id(owner),
        "listeners": ",".join(f"{l.name}://0.0.0.0:{l.port}" for l in listeners),
        "log.dirs": DATA_DIR,
        "flotilla.metrics.listener": f"0.0.0.0:{METRICS_PORT}",
        # One cluster of all brokers: metadata in Leases and KafkaTopics of this namespace.
        "flotilla.metadata.store": "kubernetes",
        "flotilla.cluster.name": owner.name,
        # Owner of the Leases and KafkaTopics the brokers create: deleted with the KafkaCluster.
        "flotilla.cluster.uid": owner.uid,
        "flotilla.kubernetes.namespace": owner.namespace,
    }
    if any(l.name != l.protocol for l in listeners):
        config["listener.security.protocol.map"] = ",".join(f"{l.name}:{l.protocol}" for l in listeners)
    if len(listeners) > 1 or listeners[0].name != listeners[0].protocol or sasl_inter_broker(spec):
        config["inter.broker.listener.name"] = listeners[0].name
    config.update(sasl_config(spec))
    config.update(tls_config(spec))
    config.update(super_users_config(spec))
    return config


def tls_config(spec: KafkaClusterSpec) -> dict[str, str]:
    """The TLS keys of listeners served with the operator's certificates (builders/certificates.py;
    keys spec.config sets itself are left to it): PEM keystores (each broker's file is a per-pod
    --override, builders/statefulset.py), the cluster CA as the inter-broker listener's truststore,
    and on mTLS listeners client certificates required from the clients CA, CN=<user> mapped to
    User:<user>."""
    out: dict[str, str] = {}
    first = spec.listeners[0].name
    for listener in managed_listeners(spec):
        prefix = f"listener.name.{listener.name.lower()}."
        out[prefix + "ssl.keystore.type"] = "PEM"
        if listener.authentication == "tls":
            out[prefix + "ssl.client.auth"] = "required"
            out[prefix + "ssl.truststore.type"] = "PEM"
            out[prefix + "ssl.truststore.location"] = f"{TLS_DIR}/{CLIENTS_CA_FILE}"
            out["ssl.principal.mapping.rules"] = PRINCIPAL_MAPPING_RULES
        elif listener.name == first:
            out[prefix + "ssl.truststore.type"] = "PEM"
            out[prefix + "ssl.truststore.location"] = f"{TLS_DIR}/{CA_FILE}"
    if fleet_certificates(spec):
        # The brokers and the operator present their certificates on the first listener (clients
        # without one still connect, as User:ANONYMOUS), mapped to their own principals.
        out[f"listener.name.{first.lower()}.ssl.client.auth"] = "requested"
        out["ssl.principal.mapping.rules"] = FLEET_MAPPING_RULES
    return {k: v for k, v in out.items() if k not in spec.config}


def sasl_config(spec: KafkaClusterSpec) -> dict[str, str]:
    """With a SASL listener: SCRAM-SHA-512 offered (unless spec.config says which mechanisms), and
    with a SASL first listener the brokers' own mechanism for it. Nothing for PLAINTEXT-only
    fleets: their file, and so their pods, stay as they were."""
    if not any(l.protocol.startswith("SASL_") for l in spec.listeners):
        return {}
    out = {}
    if "sasl.enabled.mechanisms" not in spec.config:
        out["sasl.enabled.mechanisms"] = "SCRAM-SHA-512"
    if sasl_inter_broker(spec):
        # The brokers reach each other on the first listener as flotilla-broker (SCRAM-SHA-512, its
        # password from the Secret <cluster>-broker-credentials, passed to the broker in
        # builders/statefulset.py).
        out["sasl.mechanism.inter.broker.protocol"] = INTER_BROKER_MECHANISM
    return out


def super_users_config(spec: KafkaClusterSpec) -> dict[str, str]:
    """The operator's user (with a SASL listener or an SSL first listener, where it authenticates)
    and the brokers' (where they authenticate to each other: a SASL first listener, or an SSL one
    with their certificates) as super users, added to any super.users of spec.config, so that ACLs
    never lock the operator out of what it manages nor the brokers out of CLUSTER_ACTION."""
    own = []
    if any(l.protocol.startswith("SASL_") for l in spec.listeners) or fleet_certificates(spec):
        own.append(OPERATOR_PRINCIPAL)
    if sasl_inter_broker(spec) or fleet_certificates(spec):
        own.append(BROKER_PRINCIPAL)
    if not own:
        return {}
    users = [u.strip() for u in str(spec.config.get("super.users", "")).split(";") if u.strip()]
    return {"super.users": ";".join(users + [u for u in own if u not in users])}


def replication_defaults(spec: KafkaClusterSpec) -> dict[str, str]:
    """Replication keys sized to the fleet, for those spec.config leaves unset (api/kafka_cluster.py checks the
    ones it sets): topics and __consumer_offsets get min(3, brokers) replicas, and acks=all needs
    one fewer in sync (at least 1), so that one broker restarting (a roll, a pod eviction) never
    fails an acks=all produce."""
    rf = replication_settings(spec.replicas, spec.config)
    out = {
        "default.replication.factor": str(rf.default_replication_factor),
        "min.insync.replicas": str(rf.min_insync_replicas),
        "offsets.topic.replication.factor": str(rf.offsets_topic_replication_factor),
    }
    return {k: v for k, v in out.items() if k not in spec.config}


def server_properties(owner: Owner, spec: KafkaClusterSpec, cluster_id: str | None = None) -> str:
    """server.properties: the operator's keys, the replication defaults, then the user's
    spec.config, each block sorted."""
    lines = [
        f"# Rendered by the Flotilla operator for KafkaCluster {owner.namespace}/{owner.name}.",
        "# Per-broker keys are passed on the command line: --override node.id=<ordinal>",
        "# --override advertised.listeners=<listener>://<pod>.<headless service>.<namespace>.svc:<port>",
        "# Set by the operator:",
    ]
    lines += [f"{k}={_value(v)}" for k, v in sorted(operator_config(owner, spec, cluster_id).items())]
    defaults = replication_defaults(spec)
    if defaults:
        # Not the broker count itself: scaling beyond 3 brokers must not change the file (a roll).
        lines.append("# Replication defaults for this fleet size (spec.config may set them):")
        lines += [f"{k}={v}" for k, v in sorted(defaults.items())]
    merged = {**sasl_config(spec), **super_users_config(spec)}  # keys the operator's block already holds
    user_config = {k: v for k, v in spec.config.items() if k not in merged}
    if user_config:
        lines.append("# From spec.config:")
        lines += [f"{k}={_value(v)}" for k, v in sorted(user_config.items())]
    return "\n".join(lines) + "\n"


def build_configmap(owner: Owner, spec: KafkaClusterSpec, cluster_id: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": metadata(owner, configmap_name(owner)),
        "data": {CONFIG_FILE: server_properties(owner, spec, cluster_id)},
    }
