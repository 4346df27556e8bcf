"""KafkaCluster: a fleet of brokers (spec, status and its CRD), with the rules the API server and the
operator both enforce: operator-owned config keys, listeners, storage, certificates, replication.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from .common import (AGE_COLUMN, ApiModel, CLUSTER_NAME_MAX, CONFIG_KEY_PATTERN, Condition, IntOrString,
                     LISTENER_NAME_PATTERN, LocalObjectReference, MESSAGE_COLUMN, QUANTITY_PATTERN, Resource, cel,
                     ready_columns)

# Kafka's cluster.id: a UUID in 22 base64url characters, as `kafka-storage random-uuid` prints it.
CLUSTER_ID_PATTERN = r"^[A-Za-z0-9_-]{22}$"
CLUSTER_ID_IMMUTABLE_MESSAGE = "spec.clusterId is immutable: the brokers' volumes hold the cluster id"

BROKER_PORT = 9092
METRICS_PORT = 9404

# Broker configuration keys that the operator sets itself, per pod or from other spec fields. A user
# who sets one in spec.config would silently fight the operator; the API server rejects it instead.
OPERATOR_OWNED_CONFIG_KEYS: tuple[str, ...] = (
    "node.id",
    "broker.id",
    "cluster.id",
    "listeners",
    "advertised.listeners",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "log.dirs",
    "log.dir",
    "flotilla.metrics.listener",
    "flotilla.metadata.store",
    "flotilla.cluster.name",
    "flotilla.cluster.uid",
    "flotilla.kubernetes.namespace",
)


OWNED_KEYS_SUFFIX = ": a key the operator owns (use spec.listeners and spec.storage instead)"


def owned_key_message(key: str) -> str:
    return f"spec.config must not set {key}{OWNED_KEYS_SUFFIX}"


STORAGE_IMMUTABLE_MESSAGE = (
    "spec.storage type, size and storageClassName are immutable: a StatefulSet cannot change its "
    "volume claims (deleteClaim may change)"
)
STORAGE_IMMUTABLE_RULE = (
    "self.type == oldSelf.type && self.size == oldSelf.size && "
    "has(self.storageClassName) == has(oldSelf.storageClassName) && "
    "(!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)"
)
NODE_PORT_MIN, NODE_PORT_MAX = 30000, 32767  # Kubernetes' default service-node-port-range
MAX_BROKERS = 64
FIRST_LISTENER_EXTERNAL_MESSAGE = (
    "spec.listeners[0].external must be unset: the first listener is the brokers' and the operator's (add another)")
EXTERNAL_OVERLAP_MESSAGE = (
    f"spec.listeners[].external.nodePort ranges overlap: each takes nodePort..nodePort+{MAX_BROKERS}")
EXTERNAL_NODE_PORT_MESSAGE = "spec.listeners[].external.nodePort is required with type nodeport"
EXTERNAL_LB_NODE_PORT_MESSAGE = (
    "spec.listeners[].external.nodePort must be unset with type loadbalancer (each broker has its own address)")
LISTENER_TLS_AUTH_MESSAGE = "spec.listeners[].authentication tls needs protocol SSL"
FIRST_LISTENER_TLS_AUTH_MESSAGE = (
    "spec.listeners[0].authentication must be unset: the brokers and the operator reach each other on the first "
    "listener (put the mTLS listener second)")
CERT_RENEWAL_MESSAGE = "spec.certificates.renewBeforeDays must be less than validityDays"
CA_RENEWAL_MESSAGE = "spec.certificates.renewBeforeDays must be less than caValidityDays"
CONFIG_KEY_MESSAGE = "spec.config keys must be Kafka configuration key names (lower case, e.g. log.retention.ms)"


# One rule per key: a map lookup is cheap for the API server's CEL cost estimate, and each
# message names its key.
OWNED_KEYS_RULES = [cel(f"!('{k}' in self)", owned_key_message(k)) for k in OPERATOR_OWNED_CONFIG_KEYS]


REPLICATION_KEYS = ("default.replication.factor", "min.insync.replicas", "offsets.topic.replication.factor")
MAX_DEFAULT_REPLICATION = 3


@dataclass(frozen=True)
class ReplicationSettings:
    """The replication keys a fleet's brokers run with: spec.config's, else sized to the fleet."""

    default_replication_factor: int
    min_insync_replicas: int
    offsets_topic_replication_factor: int


def _whole(config: dict[str, Any], key: str) -> int | None:
    if key not in config:
        return None
    value = config[key]
    try:
        number = int(str(value).strip())
    except ValueError:
        raise ValueError(f"{key} must be a whole number, got {value!r}") from None
    if number < 1:
        raise ValueError(f"{key} must be at least 1, got {number}")
    return number


def replication_settings(replicas: int, config: dict[str, Any]) -> ReplicationSettings:
    """Replication factor min(3, replicas) and min.insync.replicas one fewer (at least 1), unless
    spec.config sets them; ValueError naming the key when a set value cannot work with `replicas`
    brokers (a replication factor above the broker count cannot be placed; min.insync.replicas
    above it, or above the default replication factor, makes every acks=all produce fail)."""
    rf = _whole(config, "default.replication.factor")
    isr = _whole(config, "min.insync.replicas")
    offsets_rf = _whole(config, "offsets.topic.replication.factor")
    for key, value in (("default.replication.factor", rf), ("min.insync.replicas", isr),
                       ("offsets.topic.replication.factor", offsets_rf)):
        if value is not None and value > replicas:
            raise ValueError(f"{key}={value} exceeds spec.replicas ({replicas}): the fleet has only {replicas} broker(s)")
    fleet_rf = min(MAX_DEFAULT_REPLICATION, replicas)
    rf = rf if rf is not None else fleet_rf
    if isr is not None and isr > rf:
        raise ValueError(
            f"min.insync.replicas={isr} exceeds default.replication.factor ({rf}): acks=all produce to a "
            "topic created with the default would always fail")
    return ReplicationSettings(
        default_replication_factor=rf,
        min_insync_replicas=isr if isr is not None else max(1, rf - 1),
        offsets_topic_replication_factor=offsets_rf if offsets_rf is not None else fleet_rf,
    )


class Storage(ApiModel):
    """Where each broker keeps its log directory (log.dirs, mounted at /var/lib/flotilla/data)."""

    type: Literal["persistent-claim", "ephemeral"] = Field(
        default="persistent-claim",
        description=(
            "persistent-claim gives every broker its own PersistentVolumeClaim (from the StatefulSet's "
            "volumeClaimTemplates). ephemeral, for development and clusters without a volume provisioner, "
            "uses an emptyDir: a broker's data survives a container restart but not its pod, so after a "
            "roll, an eviction or a rescheduling the broker starts empty and copies its replicated "
            "partitions from the others again; partitions with a single replica lose their records."
        ),
    )
    size: str = Field(
        default="10Gi",
        max_length=32,
        pattern=QUANTITY_PATTERN,
        description="Requested volume size per broker, as a Kubernetes quantity (e.g. 10Gi). For ephemeral storage: the emptyDir size limit.",
    )
    storage_class_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="StorageClass of the claims; the cluster default when unset.",
    )
    delete_claim: bool = Field(
        default=False,
        description="Delete the brokers' claims when the KafkaCluster is deleted (data is kept by default).",
    )


#: 50 MiB/s per broker and direction: a move on a 1 Gb/s link leaves clients more than half of it,
#: and a broker holding 100 GiB still drains in about 35 minutes.
DEFAULT_REBALANCE_THROTTLE = 50 * 1024 * 1024


class Rebalance(ApiModel):
    """How the operator moves partition replicas when the fleet scales or a rebalance is requested."""

    throttle_bytes_per_second: int = Field(
        default=DEFAULT_REBALANCE_THROTTLE,
        ge=0,
        description=(
            "Replication throttle while replicas move (KIP-73: leader/follower.replication.throttled.rate on "
            "every broker, on the moving replicas only; removed when the rebalance completes). 0: no throttle."
        ),
    )
    max_partition_moves_in_flight: int = Field(
        default=5,
        ge=1,
        le=1000,
        description="Most partition reassignments that copy data at once.",
    )


class ResourceRequirements(ApiModel):
    """CPU and memory for each broker container (the container's resources)."""

    requests: dict[str, IntOrString] | None = Field(
        default=None, description="Minimum resources, e.g. {cpu: 500m, memory: 1Gi}."
    )
    limits: dict[str, IntOrString] | None = Field(
        default=None, description="Maximum resources, e.g. {memory: 2Gi}."
    )

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, value: dict[str, IntOrString] | None) -> dict[str, IntOrString] | None:
        for key, quantity in (value or {}).items():
            if isinstance(quantity, str) and not re.match(QUANTITY_PATTERN, quantity):
                raise ValueError(f"{key}: {quantity!r} is not a Kubernetes quantity (e.g. 500m, 1Gi)")
        return value


class ExternalAccess(ApiModel):
    """How clients outside the Kubernetes cluster reach a listener."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.type != 'nodeport' || has(self.nodePort)", EXTERNAL_NODE_PORT_MESSAGE, ".nodePort"),
                cel("self.type != 'loadbalancer' || !has(self.nodePort)", EXTERNAL_LB_NODE_PORT_MESSAGE,
                    ".nodePort"),
            ]
        }
    )

    type: Literal["nodeport", "loadbalancer"] = Field(
        description="nodeport: a NodePort Service for bootstrapping and one per broker; each broker advertises its "
        "node's address (the pod's status.hostIP) and its own nodePort. loadbalancer: a LoadBalancer Service "
        "for bootstrapping and one per broker; each broker advertises its own Service's address "
        "(status.loadBalancer.ingress, an IP or a host name) at the listener's port, and starts once its "
        "load balancer has one.")
    node_port: int | None = Field(
        default=None, ge=NODE_PORT_MIN, le=NODE_PORT_MAX - MAX_BROKERS,
        description="nodeport only: the bootstrap Service's nodePort; broker <ordinal> gets nodePort + 1 + "
        f"ordinal, so the next {MAX_BROKERS} ports must be free too.")
    annotations: dict[str, str] | None = Field(
        default=None,
        description="Annotations for the external Services, e.g. a cloud's load balancer settings "
        "(service.beta.kubernetes.io/aws-load-balancer-internal: \"true\").")

    @model_validator(mode="after")
    def _node_port_with_its_type(self) -> ExternalAccess:
        if self.type == "nodeport" and self.node_port is None:
            raise ValueError(EXTERNAL_NODE_PORT_MESSAGE)
        if self.type == "loadbalancer" and self.node_port is not None:
            raise ValueError(EXTERNAL_LB_NODE_PORT_MESSAGE)
        return self


class Listener(ApiModel):
    """A Kafka listener the brokers open, and the Service port clients reach it on."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    f"self.port != {METRICS_PORT}",
                    f"spec.listeners[].port must not be {METRICS_PORT}: the metrics port",
                    ".port",
                ),
                cel("!has(self.authentication) || self.protocol == 'SSL'", LISTENER_TLS_AUTH_MESSAGE,
                    ".authentication"),
            ]
        }
    )

    name: str = Field(
        default="PLAINTEXT",
        pattern=LISTENER_NAME_PATTERN,
        description="Kafka listener name (upper case), as in the listeners broker setting.",
    )
    port: int = Field(
        default=BROKER_PORT, ge=1024, le=65535, description="Port the brokers listen on and the Services expose."
    )
    protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        default="PLAINTEXT",
        description="Security protocol. SASL_* listeners offer SCRAM-SHA-512 unless spec.config sets "
        "sasl.enabled.mechanisms; when the first listener is SASL_*, the operator authenticates there as "
        "User:flotilla-operator, a super user. SSL and SASL_SSL listeners serve the certificates the operator "
        "issues from the cluster CA (Secret <name>-cluster-ca-cert holds the CA clients trust) unless "
        "spec.config sets ssl.keystore.location.",
    )
    external: ExternalAccess | None = Field(
        default=None, description="Access from outside the cluster (not on the first listener, the brokers' own).")
    authentication: Literal["tls"] | None = Field(
        default=None,
        description="tls: clients must present a certificate of the clients CA (KafkaUsers with authentication "
        "tls get one); the principal is User:<certificate CN>. SSL listeners only, not the first listener.",
    )

    @field_validator("port")
    @classmethod
    def _not_metrics(cls, port: int) -> int:
        if port == METRICS_PORT:
            raise ValueError(f"spec.listeners[].port must not be {METRICS_PORT}: the metrics port")
        return port

    @model_validator(mode="after")
    def _tls_authentication_on_ssl(self) -> Listener:
        if self.authentication is not None and self.protocol != "SSL":
            raise ValueError(LISTENER_TLS_AUTH_MESSAGE)
        return self


class IssuerRef(ApiModel):
    """A cert-manager issuer (cert-manager.io), as a cert-manager Certificate names it."""

    name: str = Field(min_length=1, max_length=253, description="The Issuer's or ClusterIssuer's name.")
    kind: Literal["Issuer", "ClusterIssuer"] = Field(
        default="Issuer", description="Issuer (in the KafkaCluster's namespace) or ClusterIssuer.")
    group: str = Field(default="cert-manager.io", description="The issuer's API group (an external issuer's).")


class Certificates(ApiModel):
    """Lifetimes of the certificates the operator issues (cluster CA, clients CA, brokers, KafkaUsers),
    or the cert-manager issuer that issues them instead."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("self.renewBeforeDays < self.validityDays", CERT_RENEWAL_MESSAGE, ".renewBeforeDays"),
                cel("self.renewBeforeDays < self.caValidityDays", CA_RENEWAL_MESSAGE, ".renewBeforeDays"),
            ]
        }
    )

    validity_days: int = Field(default=365, ge=2, le=3650,
                               description="Days a broker or user certificate is valid.")
    ca_validity_days: int = Field(default=1825, ge=2, le=7300, description="Days a CA certificate is valid.")
    renew_before_days: int = Field(
        default=30, ge=1, le=3649,
        description="A certificate this many days from expiry is renewed: brokers' by a rolling restart that keeps "
        "every partition in its ISR; a renewed CA is trusted beside the old one until the old one expires.")
    issuer_ref: IssuerRef | None = Field(
        default=None,
        description="cert-manager issues the brokers' and tls KafkaUsers' certificates from this issuer (cert-manager "
        "must be installed) instead of the operator's cluster and clients CAs; brokers and mTLS listeners trust the "
        "issuer's CA (the ca.crt of its Secrets). validityDays and renewBeforeDays become the Certificates' "
        "duration and renewBefore.")

    @model_validator(mode="after")
    def _renewal_inside_validity(self) -> Certificates:
        if self.renew_before_days >= self.validity_days:
            raise ValueError(CERT_RENEWAL_MESSAGE)
        if self.renew_before_days >= self.ca_validity_days:
            raise ValueError(CA_RENEWAL_MESSAGE)
        return self


class PodMetadata(ApiModel):
    """Extra labels and annotations for the broker pods."""

    labels: dict[str, str] | None = Field(
        default=None, description="Labels added to every broker pod (the operator's own labels win)."
    )
    annotations: dict[str, str] | None = Field(
        default=None, description="Annotations added to every broker pod."
    )


class PodTemplate(ApiModel):
    """Overrides for the broker pods' template."""

    metadata: PodMetadata | None = Field(default=None, description="Extra pod labels and annotations.")
    affinity: dict[str, Any] | None = Field(
        default=None,
        description="Pod affinity (a core/v1 Affinity), e.g. podAntiAffinity to spread brokers over nodes.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    tolerations: list[dict[str, Any]] | None = Field(
        default=None,
        description="Pod tolerations (core/v1 Toleration objects).",
    )
    node_selector: dict[str, str] | None = Field(
        default=None, description="Node labels the broker pods must run on."
    )
    priority_class_name: str | None = Field(default=None, description="PriorityClass of the broker pods.")
    termination_grace_period_seconds: int = Field(
        default=120,
        ge=0,
        le=3600,
        description="Seconds a broker gets after SIGTERM to flush and close its logs before it is killed.",
    )


class KafkaClusterSpec(ApiModel):
    """Desired state of a Flotilla broker fleet."""

    replicas: int = Field(default=3, ge=1, le=64, description="Number of brokers (node.id 0..replicas-1).")
    image: str | None = Field(
        default=None,
        min_length=1,
        description="Broker container image; the operator's default (its own version) when unset.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] | None = Field(
        default=None, description="Image pull policy of the broker container."
    )
    image_pull_secrets: list[LocalObjectReference] | None = Field(
        default=None,
        description="Secrets the kubelet uses to pull the broker image from a private registry "
        "(the broker pods' imagePullSecrets).",
    )
    resources: ResourceRequirements | None = Field(
        default=None, description="CPU and memory requests and limits of each broker."
    )
    storage: Storage = Field(
        default_factory=Storage,
        description="Each broker's log directory volume. Type, size and class are immutable once created.",
        json_schema_extra={
            # Spelled out (not {}): the API server checks the rule against the default itself.
            "default": {"type": "persistent-claim", "size": "10Gi", "deleteClaim": False},
            "x-kubernetes-validations": [cel(STORAGE_IMMUTABLE_RULE, STORAGE_IMMUTABLE_MESSAGE)],
        },
    )
    config: dict[str, IntOrString] = Field(
        default_factory=dict,
        description=(
            "Broker configuration with Kafka's key names, e.g. log.retention.ms: \"604800000\". Written to "
            "server.properties; a change rolls the brokers one at a time. Keys the operator sets itself "
            "(" + ", ".join(OPERATOR_OWNED_CONFIG_KEYS) + ") are rejected. Unless set here, "
            "default.replication.factor and offsets.topic.replication.factor are min(3, replicas) and "
            "min.insync.replicas one fewer (at least 1); values above replicas are refused."
        ),
        json_schema_extra={
            "default": {},
            "x-kubernetes-validations": [
                *OWNED_KEYS_RULES,
            ],
        },
    )
    listeners: list[Listener] = Field(
        default_factory=lambda: [Listener()],
        min_length=1,
        max_length=4,
        description="Kafka listeners. The first one is the bootstrap and inter-broker listener.",
        json_schema_extra={
            "default": [{"name": "PLAINTEXT", "port": BROKER_PORT, "protocol": "PLAINTEXT"}],
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
            "x-kubernetes-validations": [
                cel("self.all(l, self.exists_one(m, m.port == l.port))", "spec.listeners ports must be unique"),
                cel("!has(self[0].authentication)", FIRST_LISTENER_TLS_AUTH_MESSAGE),
                cel("!has(self[0].external)", FIRST_LISTENER_EXTERNAL_MESSAGE),
                cel(f"self.all(l, !has(l.external) || !has(l.external.nodePort) || self.all(m, !has(m.external) || "
                    f"!has(m.external.nodePort) || m.name == l.name || "
                    f"m.external.nodePort > l.external.nodePort + {MAX_BROKERS} || "
                    f"l.external.nodePort > m.external.nodePort + {MAX_BROKERS}))", EXTERNAL_OVERLAP_MESSAGE),
            ],
        },
    )
    certificates: Certificates = Field(
        default_factory=Certificates,
        description="Lifetimes of the certificates the operator issues for SSL and SASL_SSL listeners.",
        # Spelled out (not {}): the API server checks the rules against the default itself.
        json_schema_extra={"default": {"validityDays": 365, "caValidityDays": 1825, "renewBeforeDays": 30}},
    )
    template: PodTemplate = Field(
        default_factory=PodTemplate,
        description="Overrides for the broker pods: affinity, tolerations, labels, annotations.",
        json_schema_extra={"default": {}},
    )
    rebalance: Rebalance = Field(
        default_factory=Rebalance,
        description=(
            "Moving replicas between brokers: on scale-up once the new brokers are ready, on scale-down before "
            "the removed brokers go, and on demand (annotation flotilla.io/rebalance: <new value>); the "
            "annotation flotilla.io/rebalance-paused: \"true\" pauses it."
        ),
        json_schema_extra={"default": {}},
    )
    cluster_id: str | None = Field(
        default=None,
        pattern=CLUSTER_ID_PATTERN,
        description=(
            "Kafka cluster.id of the fleet (22 base64url characters). Unset: a new fleet gets one, recorded in the "
            "ConfigMap <name>-cluster-id that outlives the KafkaCluster, so a re-created KafkaCluster finds its "
            "brokers' data. Set it to restore a fleet whose record is gone (status.clusterId shows the id). "
            "Immutable; a value other than the recorded one is refused."
        ),
        json_schema_extra={"x-kubernetes-validations": [cel("self == oldSelf", CLUSTER_ID_IMMUTABLE_MESSAGE)]},
    )

    @field_validator("config")
    @classmethod
    def _config_keys(cls, config: dict[str, IntOrString]) -> dict[str, IntOrString]:
        owned = sorted(k for k in config if k in OPERATOR_OWNED_CONFIG_KEYS)
        if owned:
            raise ValueError("; ".join(owned_key_message(k) for k in owned))
        bad = sorted(k for k in config if not re.match(CONFIG_KEY_PATTERN, k))
        if bad:
            raise ValueError(f"{CONFIG_KEY_MESSAGE}; got {', '.join(bad)}")
        return config

    @model_validator(mode="after")
    def _replication_fits(self) -> KafkaClusterSpec:
        try:
            replication_settings(self.replicas, self.config)
        except ValueError as exc:
            # Raised here (not in a field validator) so that it sees spec.replicas; named as a field.
            raise ValueError(f"spec.config.{exc}") from None
        return self

    @field_validator("listeners")
    @classmethod
    def _unique_listeners(cls, listeners: list[Listener]) -> list[Listener]:
        names = [l.name for l in listeners]
        ports = [l.port for l in listeners]
        if len(set(names)) != len(names):
            raise ValueError("spec.listeners names must be unique")
        if len(set(ports)) != len(ports):
            raise ValueError("spec.listeners ports must be unique")
        if listeners[0].authentication is not None:
            raise ValueError(FIRST_LISTENER_TLS_AUTH_MESSAGE)
        if listeners[0].external is not None:
            raise ValueError(FIRST_LISTENER_EXTERNAL_MESSAGE)
        starts = sorted(l.external.node_port for l in listeners if l.external is not None and l.external.node_port is not None)
        if any(b <= a + MAX_BROKERS for a, b in zip(starts, starts[1:])):
            raise ValueError(EXTERNAL_OVERLAP_MESSAGE)
        return listeners


class RebalanceStatus(ApiModel):
    """status.rebalance: written by the operator, read back by it after a restart."""

    model_config = ConfigDict(extra="ignore")

    phase: Literal["Idle", "Moving", "Paused", "Blocked"] | None = Field(default=None, description="Idle, Moving, Paused or Blocked.")
    reason: str | None = Field(default=None, description="Why it runs: ScaleUp, ScaleDown or Requested.")
    brokers: list[int] | None = Field(default=None, description="The brokers the replicas are spread over.")
    completed_brokers: list[int] | None = Field(
        default=None, description="The brokers the last completed rebalance spread replicas over (a scale-up "
        "rebalances when the fleet differs).")
    partitions_total: int | None = Field(default=None, description="Partitions this rebalance moves.")
    partitions_moved: int | None = Field(default=None, description="Partitions moved so far.")
    bytes_to_move: int | None = Field(default=None, description="Bytes of the partitions to copy, when it started.")
    started_at: str | None = Field(default=None, description="When this rebalance started.")
    message: str | None = Field(default=None, description="What it does or why it cannot.")
    token: str | None = Field(default=None, description="The last flotilla.io/rebalance value acted upon.")
    throttled_topics: list[str] | None = Field(default=None, description="Topics given throttled replicas (removed at the end).")
    throttled_brokers: list[int] | None = Field(default=None, description="Brokers given throttle rates (removed at the end).")
    throttle_rate: int | None = Field(
        default=None, description="The replication throttle (bytes/s) last set on the brokers; a changed "
        "spec.rebalance.throttleBytesPerSecond is set on them at once, for the moves in flight too.")


class KafkaClusterStatus(ApiModel):
    """Observed state of the broker fleet, written by the operator."""

    model_config = ConfigDict(extra="ignore")

    observed_generation: int | None = Field(
        default=None, description="The metadata.generation the operator last reconciled."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description="Ready, Reconciling, Degraded and Stalled conditions (ScaleDownBlocked, ReconciliationPaused when they apply).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    replicas: int | None = Field(default=None, description="Brokers that exist (pods of the StatefulSet).")
    ready_replicas: int | None = Field(default=None, description="Brokers whose readiness probe passes.")
    updated_replicas: int | None = Field(
        default=None, description="Brokers already running the current configuration."
    )
    bootstrap_servers: str | None = Field(
        default=None, description="Address clients bootstrap from: <name>-bootstrap.<namespace>.svc:<port>."
    )
    config_hash: str | None = Field(
        default=None, description="Hash of the rendered broker configuration the pods should run."
    )
    selector: str | None = Field(default=None, description="Label selector of the broker pods (for kubectl scale).")
    registered_brokers: int | None = Field(
        default=None, description="Brokers registered in the cluster metadata (broker Leases renewed in time)."
    )
    controller: int | None = Field(
        default=None, description="Node id of the cluster's controller (holder of the controller Lease); unset if none."
    )
    cluster_id: str | None = Field(
        default=None, description="Kafka cluster.id the brokers run with (recorded in the ConfigMap <name>-cluster-id)."
    )
    rebalance: RebalanceStatus | None = Field(
        default=None, description="Where the operator's movement of replicas stands (builders/rebalance.py)."
    )


KAFKA_CLUSTER = Resource(
    kind="KafkaCluster",
    plural="kafkaclusters",
    short_names=["fkc"],
    spec=KafkaClusterSpec,
    status=KafkaClusterStatus,
    description="A fleet of Flotilla brokers speaking the Kafka protocol, run as a StatefulSet.",
    printer_columns=[
        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
        {"name": "Ready-Brokers", "type": "integer", "jsonPath": ".status.readyReplicas"},
        {"name": "Registered", "type": "integer", "jsonPath": ".status.registeredBrokers"},
        {"name": "Controller", "type": "integer", "jsonPath": ".status.controller", "priority": 1},
        *ready_columns(),
        {"name": "Bootstrap", "type": "string", "jsonPath": ".status.bootstrapServers", "priority": 1},
        MESSAGE_COLUMN,
        AGE_COLUMN,
    ],
    root_validations=[
        cel(
            f"self.metadata.name.size() <= {CLUSTER_NAME_MAX} && !self.metadata.name.contains('.')",
            f"metadata.name must be at most {CLUSTER_NAME_MAX} characters without dots, so that the "
            "names derived from it (Services, pods) are valid DNS labels",
        )
    ],
    scale=True,
)
