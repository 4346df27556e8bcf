"""The operator's API (group flotilla.io, version v1alpha1), modelled once.

These pydantic models are the single source of truth: `crd_render` turns them into the CRD YAML
under `crds/` (OpenAPI schema, defaults, CEL rules) and the handlers parse every spec with them, so
the API server and the operator agree on what is valid. Every field has a description, which is
what `kubectl explain` shows.

Python attributes are snake_case; the Kubernetes spelling (camelCase) is the alias. Rules that the
API server enforces through CEL (`x-kubernetes-validations`) are also checked here, with the same
messages, so that a unit test (or a user of the models) sees the same error as `kubectl apply`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from . import API_VERSION

# Kubernetes' own regular expression for a resource.Quantity ("10Gi", "500m", "1.5", "1e3").
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# Kafka's legal topic name characters (max 249).
TOPIC_PATTERN = r"^[a-zA-Z0-9._-]+$"
# A Go-style duration such as 30s, 10m, 1h30m.
DURATION_PATTERN = r"^([0-9]+(ms|s|m|h))+$"
# A Kafka listener name as used in `listeners` (PLAINTEXT, INTERNAL, ...).
LISTENER_NAME_PATTERN = r"^[A-Z][A-Z0-9_]{0,31}$"
# A Kafka configuration key (log.retention.ms, flotilla.something, ...).
CONFIG_KEY_PATTERN = r"^[a-z0-9][a-z0-9._-]*$"
# metadata.name of a KafkaCluster: a DNS-1035 label short enough for every derived name
# (`<name>-broker-<ordinal>`, `<name>-bootstrap`, the StatefulSet's controller-revision-hash label).
CLUSTER_NAME_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
CLUSTER_NAME_MAX = 40
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


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One `x-kubernetes-validations` entry."""
    out = {"rule": rule, "message": message}
    if field_path:
        out["fieldPath"] = field_path
    return out


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


class ApiModel(BaseModel):
    """Base for every API object: camelCase on the wire, unknown fields rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        use_attribute_docstrings=False,
    )

    def to_k8s(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


IntOrString = int | str


# --------------------------------------------------------------------------------------------
# Shared pieces


class ClusterReference(ApiModel):
    """The KafkaCluster (in the same namespace) that this object applies to."""

    name: str = Field(
        min_length=1,
        max_length=CLUSTER_NAME_MAX,
        pattern=CLUSTER_NAME_PATTERN,
        description="Name of a KafkaCluster in this object's namespace.",
    )


class LocalObjectReference(ApiModel):
    """A Secret in this object's namespace, by name (Kubernetes' LocalObjectReference)."""

    name: str = Field(
        min_length=1,
        max_length=253,
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="Name of a Secret of type kubernetes.io/dockerconfigjson in this namespace.",
    )


class Condition(ApiModel):
    """A status condition, shaped like Kubernetes' metav1.Condition."""

    type: str = Field(description=(
        "Condition type: Ready, Reconciling, Degraded, Stalled (the spec cannot be reconciled as written) "
        "or ReconciliationPaused (the flotilla.io/pause-reconciliation annotation is set)."))
    status: Literal["True", "False", "Unknown"] = Field(description="True, False or Unknown.")
    reason: str | None = Field(default=None, description="One CamelCase word saying why.")
    message: str | None = Field(default=None, description="A human readable explanation.")
    last_transition_time: datetime | None = Field(
        default=None, description="When status last changed (RFC 3339)."
    )
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation this condition was computed for."
    )


# --------------------------------------------------------------------------------------------
# KafkaCluster


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


# --------------------------------------------------------------------------------------------
# ClientQuota (KIP-13)


ENTITY_USER_MESSAGE = "spec.entity: set at most one of user or defaultUser: true"
ENTITY_CLIENT_MESSAGE = "spec.entity: set at most one of clientId or default: true"
ENTITY_EMPTY_MESSAGE = ("spec.entity: name a user (user or defaultUser: true), a client-id (clientId or "
                        "default: true), or one of each")
RATES_MESSAGE = "spec: set at least one of producerByteRate, consumerByteRate or requestPercentage"
_DEFAULT_USER = "(has(self.defaultUser) && self.defaultUser)"
_DEFAULT_CLIENT = "(has(self.default) && self.default)"


class QuotaEntity(ApiModel):
    """Who the quota applies to, as Kafka's quota entities: a user (the principal a connection
    authenticated as: SASL user name or mapped certificate subject), a client-id, or one of each;
    each named or the default. Kafka's precedence picks the most specific entity that matches a
    connection (docs/quotas.md)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(f"!(has(self.user) && {_DEFAULT_USER})", ENTITY_USER_MESSAGE),
                cel(f"!(has(self.clientId) && {_DEFAULT_CLIENT})", ENTITY_CLIENT_MESSAGE),
                cel(f"has(self.user) || {_DEFAULT_USER} || has(self.clientId) || {_DEFAULT_CLIENT}",
                    ENTITY_EMPTY_MESSAGE),
            ]
        }
    )

    user: str | None = Field(
        default=None,
        min_length=1,
        max_length=1024,
        description="The user (principal name) the quota applies to, shared by all its connections.",
    )
    default_user: bool | None = Field(
        default=None, description="true: the default quota for every user that has no quota of its own."
    )
    client_id: str | None = Field(
        default=None,
        max_length=255,
        description="The client.id the quota applies to (the empty string is the clients that send none).",
    )
    default: bool | None = Field(
        default=None, description="true: the default quota for every client-id that has no quota of its own."
    )

    @model_validator(mode="after")
    def _valid_combination(self) -> QuotaEntity:
        if self.user is not None and self.default_user:
            raise ValueError(ENTITY_USER_MESSAGE)
        if self.client_id is not None and self.default:
            raise ValueError(ENTITY_CLIENT_MESSAGE)
        if self.user is None and not self.default_user and self.client_id is None and not self.default:
            raise ValueError(ENTITY_EMPTY_MESSAGE)
        return self


class ClientQuotaSpec(ApiModel):
    """Quotas (KIP-13 byte rates, KIP-124 request time) every broker enforces for a user and/or client-id."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("has(self.producerByteRate) || has(self.consumerByteRate) || has(self.requestPercentage)",
                    RATES_MESSAGE),
            ]
        }
    )

    cluster_ref: ClusterReference = Field(description="The KafkaCluster whose brokers enforce this quota.")
    entity: QuotaEntity = Field(description="The user and/or client-id (named or the default) the quota applies to.")
    producer_byte_rate: int | None = Field(
        default=None,
        ge=1,
        description="Kafka's producer_byte_rate: bytes per second a client may produce, per broker.",
    )
    consumer_byte_rate: int | None = Field(
        default=None,
        ge=1,
        description="Kafka's consumer_byte_rate: bytes per second a client may fetch, per broker.",
    )
    request_percentage: float | None = Field(
        default=None,
        gt=0,
        description=("Kafka's request_percentage (KIP-124): the share of one request-handling thread's time a "
                     "client may use, in percent per quota window, per broker."),
    )

    @model_validator(mode="after")
    def _some_rate(self) -> ClientQuotaSpec:
        if self.producer_byte_rate is None and self.consumer_byte_rate is None and self.request_percentage is None:
            raise ValueError(RATES_MESSAGE)
        return self


class ClientQuotaBrokerStatus(ApiModel):
    """What one broker holds for this quota's entity (its DescribeClientQuotas answer)."""

    model_config = ConfigDict(extra="ignore")

    node_id: int = Field(description="The broker's node.id.")
    producer_byte_rate: int | None = Field(default=None, description="producer_byte_rate the broker applies.")
    consumer_byte_rate: int | None = Field(default=None, description="consumer_byte_rate the broker applies.")
    request_percentage: float | None = Field(default=None, description="request_percentage the broker applies.")
    last_error: str | None = Field(default=None, description="Why the broker could not be asked, if it could not.")


class ClientQuotaStatus(ApiModel):
    """Observed state of a ClientQuota."""

    model_config = ConfigDict(extra="ignore")

    observed_generation: int | None = Field(default=None, description="The metadata.generation last handled.")
    conditions: list[Condition] | None = Field(
        default=None,
        description=(
            "Ready (reasons: Applied, Pending, Conflict, Unreachable, Invalid) and Stalled (True for Conflict "
            "and Invalid); ReconciliationPaused while paused."),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    brokers: list[ClientQuotaBrokerStatus] | None = Field(
        default=None, description="Per broker: the values it applies for this entity, or the last error."
    )


# --------------------------------------------------------------------------------------------
# RecordDeletion (KIP-107)


BEFORE_MESSAGE = "spec.before: set exactly one of offset, timestamp or consumedBy"
KEEP_MESSAGE = "spec.keep: set exactly one of records or duration"


class DeleteBefore(ApiModel):
    """Where deletion stops: records below this point are deleted (the log start offset moves up to it)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(
                    "[has(self.offset), has(self.timestamp), has(self.consumedBy)]"
                    ".filter(x, x).size() == 1",
                    BEFORE_MESSAGE,
                )
            ]
        }
    )

    offset: int | None = Field(
        default=None, ge=0, description="Delete records with offsets below this offset in every chosen partition."
    )
    timestamp: datetime | None = Field(
        default=None, description="Delete records older than this time (RFC 3339), found by the time index."
    )
    consumed_by: list[str] | None = Field(
        default=None,
        min_length=1,
        description=(
            "Delete what every one of these consumer groups has committed: per partition, "
            "below the lowest committed offset among them (a partition one of them never "
            "committed is left alone)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "set", "items": {"type": "string", "minLength": 1}},
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> DeleteBefore:
        chosen = [self.offset is not None, self.timestamp is not None, self.consumed_by is not None]
        if sum(chosen) != 1:
            raise ValueError(BEFORE_MESSAGE)
        if self.consumed_by is not None and any(not g for g in self.consumed_by):
            raise ValueError("spec.before.consumedBy: a group id must not be empty")
        return self


class KeepMargin(ApiModel):
    """A safety margin kept behind the point `before` computes."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel("[has(self.records), has(self.duration)].filter(x, x).size() == 1", KEEP_MESSAGE)
            ]
        }
    )

    records: int | None = Field(default=None, ge=0, description="Keep this many records below the computed offset.")
    duration: str | None = Field(
        default=None, pattern=DURATION_PATTERN,
        description="Keep the records written within this duration (e.g. 1h), whatever the computed offset.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> KeepMargin:
        if (self.records is None) == (self.duration is None):
            raise ValueError(KEEP_MESSAGE)
        return self


class RecordDeletionSpec(ApiModel):
    """Delete records from a topic (KIP-107 DeleteRecords), once or on an interval."""

    cluster_ref: ClusterReference = Field(description="The KafkaCluster that holds the topic.")
    topic: str = Field(min_length=1, max_length=249, pattern=TOPIC_PATTERN, description="Topic to delete records from.")
    partitions: list[int] | None = Field(
        default=None,
        description="Partitions to delete from; every partition of the topic when unset.",
        json_schema_extra={"x-kubernetes-list-type": "set", "items": {"type": "integer", "minimum": 0}},
    )
    before: DeleteBefore = Field(description="Delete records before an offset, a timestamp, or what groups committed.")
    keep: KeepMargin | None = Field(
        default=None, description="Optional safety margin: records or a duration kept behind the computed point."
    )
    interval: str | None = Field(
        default=None,
        pattern=DURATION_PATTERN,
        description="Repeat every interval (e.g. 10m, 1h); once per spec generation when unset.",
    )

    @field_validator("partitions")
    @classmethod
    def _non_negative(cls, partitions: list[int] | None) -> list[int] | None:
        if partitions is not None and any(p < 0 for p in partitions):
            raise ValueError("spec.partitions entries must be >= 0")
        return partitions


class PartitionDeletion(ApiModel):
    """What the last run did to one partition."""

    partition: int = Field(description="Partition index.")
    low_watermark: int = Field(description="The partition's log start offset after the run (lowest over its replicas).")
    records_deleted: int = Field(description="Records this partition lost in the last run (0 when nothing was due).")
    error: str | None = Field(default=None, description="Why this partition was not deleted from, if it was not.")


class RecordDeletionStatus(ApiModel):
    """Observed state of a RecordDeletion."""

    model_config = ConfigDict(extra="ignore")

    observed_generation: int | None = Field(default=None, description="The metadata.generation last handled.")
    conditions: list[Condition] | None = Field(
        default=None,
        description=(
            "Ready (reasons: Deleted, InvalidSpec, ClusterNotReady, Unreachable, "
            "TopicNotFound, PartitionNotFound, GroupNotFound, NotEnoughReplicas, DeleteFailed) and Stalled "
            "(True for an invalid spec); ReconciliationPaused while paused."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    policy: str | None = Field(default=None, description="The policy in one line (for kubectl get).")
    last_run_time: datetime | None = Field(default=None, description="When the last deletion ran.")
    next_run_time: datetime | None = Field(default=None, description="When the next run is due (unset: none is).")
    records_deleted: int | None = Field(default=None, description="Records deleted by this resource, over all runs.")
    partitions: list[PartitionDeletion] | None = Field(
        default=None, description="Per partition: the low watermark reached and the records deleted by the last run."
    )


# --------------------------------------------------------------------------------------------
# KafkaTopic (cluster metadata: written by users or by the brokers, completed by the controller)


def _partition_budget() -> tuple[int, int, int]:
    """(bytes per partition entry at 0 replicas, bytes per replica, object budget): the brokers'
    own worst-case sizing of a KafkaTopic (broker/metadata/kube_objects.py), for a CEL rule."""
    from broker.metadata.kube_objects import TOPIC_OBJECT_BUDGET, partition_entry_bytes

    per_replica = partition_entry_bytes(2) - partition_entry_bytes(1)
    return partition_entry_bytes(1) - per_replica, per_replica, TOPIC_OBJECT_BUDGET


_ENTRY_BASE, _ENTRY_PER_REPLICA, _TOPIC_BUDGET = _partition_budget()


def topic_partitions_limit(replicas: int) -> int:
    """The most partitions one KafkaTopic holds at this replication factor (etcd's object size limit)."""
    return _TOPIC_BUDGET // (_ENTRY_BASE + _ENTRY_PER_REPLICA * max(1, replicas))


TOPIC_SIZE_MESSAGE = (
    "spec.partitions: too many partitions for one KafkaTopic at this replication factor (etcd's object "
    f"size limit): at most {topic_partitions_limit(1)} with 1 replica, {topic_partitions_limit(3)} with 3"
)
TOPIC_SIZE_RULE = (
    "!has(self.partitions) || self.partitions * "
    f"({_ENTRY_BASE} + {_ENTRY_PER_REPLICA} * (has(self.replicas) ? self.replicas : 1)) <= {_TOPIC_BUDGET}"
)
PARTITIONS_SHRINK_MESSAGE = "spec.partitions cannot decrease: Kafka topics only gain partitions"
TOPIC_NAME_IMMUTABLE_MESSAGE = (
    "spec.topicName is immutable (it may only be added, equal to metadata.name): create a new KafkaTopic "
    "for another topic"
)
TOPIC_NAME_IMMUTABLE_RULE = (
    "has(oldSelf.spec.topicName) ? (has(self.spec.topicName) && self.spec.topicName == oldSelf.spec.topicName)"
    " : (!has(self.spec.topicName) || self.spec.topicName == self.metadata.name)"
)


# The brokers own status (docs/operator.md, "KafkaTopic status"): the status subresource keeps a
# user's write of the resource (kubectl replace/edit, a GitOps sync) from touching it, and these
# rules refuse, from anyone and through /status too, the writes that would make the brokers take
# the topic for a new one: its id removed or changed, its assignment removed or cut short.
TOPIC_ID_KEPT_MESSAGE = (
    "status.topicId is the brokers' record of the topic and cannot be removed or changed "
    "(delete the KafkaTopic to delete the topic)"
)
TOPIC_ID_KEPT_RULE = (
    "!has(oldSelf.status) || !has(oldSelf.status.topicId) || "
    "(has(self.status) && has(self.status.topicId) && self.status.topicId == oldSelf.status.topicId)"
)
ASSIGNMENT_KEPT_MESSAGE = (
    "status.assignment is the brokers' record of where each partition lives and cannot be removed or shortened"
)
ASSIGNMENT_KEPT_RULE = (
    "!has(oldSelf.status) || !has(oldSelf.status.assignment) || "
    "(has(self.status) && has(self.status.assignment) && "
    "self.status.assignment.size() >= oldSelf.status.assignment.size())"
)


class KafkaTopicSpec(ApiModel):
    """A Kafka topic of one KafkaCluster (named by the label flotilla.io/cluster). Whoever created the
    resource owns spec; the brokers never write it (status shows the topic as it is in force)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                cel(TOPIC_SIZE_RULE, TOPIC_SIZE_MESSAGE, ".partitions"),
                cel("!has(oldSelf.partitions) || (has(self.partitions) && self.partitions >= oldSelf.partitions)",
                    PARTITIONS_SHRINK_MESSAGE, ".partitions"),
            ]
        }
    )

    topic_name: str | None = Field(
        default=None,
        min_length=1,
        max_length=249,
        pattern=TOPIC_PATTERN,
        description=(
            "The Kafka topic name; metadata.name when unset. Needed for names Kubernetes objects "
            "cannot have (capitals, '_', e.g. __consumer_offsets)."
        ),
    )
    partitions: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Number of partitions (may grow, never shrink); the brokers' num.partitions when unset.",
    )
    replicas: int | None = Field(
        default=None,
        ge=1,
        le=32767,
        description="Replication factor; the brokers' default.replication.factor when unset.",
    )
    config: dict[str, Any] | None = Field(
        default=None,
        description="Topic configuration (Kafka's topic-level keys, e.g. retention.ms: 86400000).",
    )

    @model_validator(mode="after")
    def _fits(self) -> KafkaTopicSpec:
        if self.partitions is not None and self.partitions > topic_partitions_limit(self.replicas or 1):
            raise ValueError(TOPIC_SIZE_MESSAGE)
        return self


class PartitionAssignment(ApiModel):
    """Where one partition lives (entry i of status.assignment is partition i)."""

    leader: int = Field(description="Node id of the partition's leader; -1 while it has none (offline).")
    leader_epoch: int = Field(description="Leader epoch, raised by the controller on every leader change.")
    replicas: list[int] = Field(description="Node ids of the brokers that hold the partition.")
    isr: list[int] = Field(description="In-sync replicas: the replicas caught up with the leader.")
    adding_replicas: list[int] | None = Field(
        default=None, description="During a partition reassignment: replicas being added (not in the original replicas).")
    removing_replicas: list[int] | None = Field(
        default=None, description="During a partition reassignment: replicas being removed (not in the target replicas).")


class KafkaTopicStatus(ApiModel):
    """The topic as it is in force, written by the brokers (never by users): what the controller
    decided, and changes made through Kafka's APIs (AlterConfigs, CreatePartitions)."""

    model_config = ConfigDict(extra="ignore")

    topic_name: str | None = Field(default=None, description="The Kafka topic name (spec.topicName or metadata.name).")
    topic_id: str | None = Field(
        default=None, description="The topic's id, as Kafka tools print it (base64); set when the topic exists."
    )
    partitions: int | None = Field(
        default=None, description="Partitions the topic has: the larger of spec.partitions and CreatePartitions' count."
    )
    replication_factor: int | None = Field(default=None, description="Replicas of each partition.")
    config: dict[str, str] | None = Field(
        default=None,
        description=(
            "Topic configuration in force, as Kafka strings: spec.config once a spec generation is reflected, "
            "then changes made through AlterConfigs or IncrementalAlterConfigs, until spec changes again."
        ),
    )
    observed_generation: int | None = Field(
        default=None, description="The metadata.generation whose spec this status reflects."
    )
    under_replicated_partitions: int | None = Field(
        default=None, description="Partitions whose ISR is smaller than their replicas."
    )
    offline_partitions: int | None = Field(default=None, description="Partitions without a leader.")
    assignment: list[PartitionAssignment] | None = Field(
        default=None, description="One entry per partition, in partition order: leader, epoch, replicas, ISR."
    )
    conditions: list[Condition] | None = Field(
        default=None,
        description=(
            "The Ready condition: True once every partition has a leader; False with reason InvalidConfig, "
            "ReplicationFactorChange, InvalidReplicationFactor or ResourceConflict when the spec cannot be "
            "brought in force (Kafka's message says why)."
        ),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


# --------------------------------------------------------------------------------------------
# KafkaUser: a SCRAM user, its ACLs and quotas (Strimzi's convention)

ACL_OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
                  "DescribeConfigs", "AlterConfigs", "IdempotentWrite")
ACL_RESOURCE_NAME_MESSAGE = "spec.authorization.acls[].resource.name is required unless type is cluster"
KAFKA_USER_NAME_MESSAGE = ("metadata.name is the Kafka user name: at most 64 characters, and not "
                           "flotilla-operator (the operator's own user)")


class AclResource(ApiModel):
    """The resource an ACL is about, in Kafka's terms (kafka-acls --topic/--group/--cluster/--transactional-id)."""

    model_config = ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [
            cel("self.type == 'cluster' || (has(self.name) && self.name != '')", ACL_RESOURCE_NAME_MESSAGE)]})

    type: Literal["topic", "group", "cluster", "transactionalId"] = Field(description="Kafka resource type.")
    name: str | None = Field(default=None, max_length=255,
                             description="Resource name, or its prefix with patternType prefix ('*': every one).")
    pattern_type: Literal["literal", "prefix"] = Field(
        default="literal", description="literal: exactly `name` ('*' matches all); prefix: every name starting with it.")

    @model_validator(mode="after")
    def _named(self) -> AclResource:
        if self.type != "cluster" and not self.name:
            raise ValueError(ACL_RESOURCE_NAME_MESSAGE)
        return self


class AclRule(ApiModel):
    """One ACL rule for this user: operations allowed (or denied) on a resource from a host."""

    resource: AclResource = Field(description="What the rule is about.")
    operations: list[Literal[ACL_OPERATIONS]] = Field(  # type: ignore[valid-type]
        min_length=1, max_length=len(ACL_OPERATIONS), description="Kafka operations the rule allows or denies.")
    host: str = Field(default="*", max_length=255, description="Client host the rule applies to ('*': any).")
    type: Literal["allow", "deny"] = Field(default="allow", description="allow or deny (deny wins, as in Kafka).")


class KafkaUserAuthentication(ApiModel):
    """How the user authenticates."""

    type: Literal["scram-sha-512", "tls"] = Field(
        description="scram-sha-512: a SCRAM-SHA-512 credential (KIP-554), its password in the user's Secret; tls: a "
        "client certificate CN=<name> from the cluster's clients CA (the Secret holds ca.crt, user.crt, user.key and "
        "user.pem, the PEM keystore Kafka clients read), "
        "for SSL listeners with authentication tls, renewed before it expires.")


class KafkaUserAuthorization(ApiModel):
    """The user's ACLs: Git is the truth, an ACL of the user's principal not listed here is removed."""

    type: Literal["simple"] = Field(default="simple", description="simple: Kafka ACLs (StandardAuthorizer).")
    acls: list[AclRule] = Field(default_factory=list, max_length=256, description="ACL rules for User:<name>.")


class KafkaUserQuotas(ApiModel):
    """Quotas of the user entity (KIP-13, KIP-124), as a ClientQuota with entity.user would set."""

    producer_byte_rate: int | None = Field(default=None, ge=1, description="Bytes per second produced, per broker.")
    consumer_byte_rate: int | None = Field(default=None, ge=1, description="Bytes per second fetched, per broker.")
    request_percentage: float | None = Field(default=None, gt=0,
                                             description="Share of a request thread's time, in percent, per broker.")


class KafkaUserSpec(ApiModel):
    """A Kafka user of one KafkaCluster: its SCRAM credential (password in a Secret named after
    it), ACLs and quotas. The user name is metadata.name."""

    cluster_ref: ClusterReference = Field(description="The KafkaCluster this user belongs to.")
    authentication: KafkaUserAuthentication = Field(description="How the user authenticates.")
    authorization: KafkaUserAuthorization | None = Field(default=None, description="The user's ACLs.")
    quotas: KafkaUserQuotas | None = Field(default=None, description="The user's quotas.")


class KafkaUserStatus(ApiModel):
    """Observed state of a KafkaUser."""

    model_config = ConfigDict(extra="ignore")

    observed_generation: int | None = Field(default=None, description="The metadata.generation last handled.")
    username: str | None = Field(default=None, description="The Kafka user name (principal User:<username>).")
    secret: str | None = Field(default=None, description="The Secret holding username, password and sasl.jaas.config.")
    quotas: KafkaUserQuotas | None = Field(default=None, description="The quotas last applied to the user entity.")
    acls: int | None = Field(default=None, description="How many ACL bindings the principal holds.")
    quota_conflict: str | None = Field(
        default=None, description=("Set while spec.quotas is not applied because an older ClientQuota sets the "
                                   "quota of this user entity (the oldest resource owns an entity)."))
    conditions: list[Condition] | None = Field(
        default=None,
        description=("Ready (reasons: Applied, Pending, Unreachable, Invalid, Conflict) and Stalled; "
                     "ReconciliationPaused while paused."),
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )


# --------------------------------------------------------------------------------------------
# The resources, as the CRD renderer and the handlers see them


class Resource:
    """What the CRD renderer needs to know about one custom resource."""

    def __init__(
        self,
        kind: str,
        plural: str,
        short_names: list[str],
        spec: type[ApiModel],
        status: type[ApiModel],
        description: str,
        printer_columns: list[dict[str, Any]],
        root_validations: list[dict[str, str]] | None = None,
        scale: bool = False,
        status_subresource: bool = True,
    ) -> None:
        self.kind = kind
        self.plural = plural
        self.singular = kind.lower()
        self.short_names = short_names
        self.spec = spec
        self.status = status
        self.description = description
        self.printer_columns = printer_columns
        self.root_validations = root_validations or []
        self.scale = scale
        # Without the subresource, spec and status are written together (one compare-and-swap).
        self.status_subresource = status_subresource


def _ready_columns() -> list[dict[str, Any]]:
    return [
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Reason", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'},
    ]


_AGE = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
# With -o wide: why, in the operator's words (the Ready condition's message).
_MESSAGE = {"name": "Message", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
            "priority": 1}

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
        *_ready_columns(),
        {"name": "Bootstrap", "type": "string", "jsonPath": ".status.bootstrapServers", "priority": 1},
        _MESSAGE,
        _AGE,
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

CLIENT_QUOTA = Resource(
    kind="ClientQuota",
    plural="clientquotas",
    short_names=["cq"],
    spec=ClientQuotaSpec,
    status=ClientQuotaStatus,
    description=("Produce and fetch byte-rate (KIP-13) and request-time (KIP-124) quotas for a user, a client-id "
                 "or both, enforced by every broker."),
    printer_columns=[
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef.name"},
        {"name": "User", "type": "string", "jsonPath": ".spec.entity.user"},
        {"name": "Client-ID", "type": "string", "jsonPath": ".spec.entity.clientId"},
        {"name": "Produce-B/s", "type": "integer", "jsonPath": ".spec.producerByteRate"},
        {"name": "Consume-B/s", "type": "integer", "jsonPath": ".spec.consumerByteRate"},
        {"name": "Request-%", "type": "number", "jsonPath": ".spec.requestPercentage", "priority": 1},
        *_ready_columns(),
        _MESSAGE,
        _AGE,
    ],
)

RECORD_DELETION = Resource(
    kind="RecordDeletion",
    plural="recorddeletions",
    short_names=["rdel"],
    spec=RecordDeletionSpec,
    status=RecordDeletionStatus,
    description="Deletes a topic's records before an offset, a timestamp or what consumer groups committed (KIP-107).",
    printer_columns=[
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef.name"},
        {"name": "Topic", "type": "string", "jsonPath": ".spec.topic"},
        {"name": "Policy", "type": "string", "jsonPath": ".status.policy"},
        {"name": "Interval", "type": "string", "jsonPath": ".spec.interval"},
        {"name": "Last-Run", "type": "date", "jsonPath": ".status.lastRunTime"},
        {"name": "Deleted", "type": "integer", "jsonPath": ".status.recordsDeleted"},
        *_ready_columns(),
        _MESSAGE,
        _AGE,
    ],
)

KAFKA_TOPIC = Resource(
    kind="KafkaTopic",
    plural="kafkatopics",
    short_names=["fkt"],
    spec=KafkaTopicSpec,
    status=KafkaTopicStatus,
    description=(
        "A Kafka topic of the KafkaCluster named by the label flotilla.io/cluster. Users create, grow, "
        "configure and delete topics with these; the brokers keep one per topic a Kafka client created "
        "(labelled flotilla.io/created-by=fleet). spec is its creator's alone; the brokers write status: "
        "the topic as it is in force."
    ),
    printer_columns=[
        {"name": "Cluster", "type": "string", "jsonPath": '.metadata.labels.flotilla\\.io/cluster'},
        {"name": "Topic", "type": "string", "jsonPath": ".status.topicName"},
        {"name": "Partitions", "type": "integer", "jsonPath": ".status.partitions"},
        {"name": "RF", "type": "integer", "jsonPath": ".status.replicationFactor"},
        {"name": "Under-Replicated", "type": "integer", "jsonPath": ".status.underReplicatedPartitions"},
        {"name": "Offline", "type": "integer", "jsonPath": ".status.offlinePartitions"},
        *_ready_columns(),
        {"name": "Topic-ID", "type": "string", "jsonPath": ".status.topicId", "priority": 1},
        _AGE,
    ],
    root_validations=[
        cel(TOPIC_NAME_IMMUTABLE_RULE, TOPIC_NAME_IMMUTABLE_MESSAGE, ".spec.topicName"),
        cel(TOPIC_ID_KEPT_RULE, TOPIC_ID_KEPT_MESSAGE, ".status.topicId"),
        cel(ASSIGNMENT_KEPT_RULE, ASSIGNMENT_KEPT_MESSAGE, ".status.assignment"),
    ],
    # Status through /status only: a user's PUT of the resource cannot drop what the brokers own.
    status_subresource=True,
)

KAFKA_USER = Resource(
    kind="KafkaUser",
    plural="kafkausers",
    short_names=["fku"],
    spec=KafkaUserSpec,
    status=KafkaUserStatus,
    description=("A Kafka user of a KafkaCluster: a SCRAM-SHA-512 credential whose password the operator keeps "
                 "in a Secret named after the user, its ACLs and its quotas."),
    printer_columns=[
        {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterRef.name"},
        {"name": "Authentication", "type": "string", "jsonPath": ".spec.authentication.type"},
        {"name": "Secret", "type": "string", "jsonPath": ".status.secret", "priority": 1},
        *_ready_columns(),
        _MESSAGE,
        _AGE,
    ],
    root_validations=[
        cel("self.metadata.name.size() <= 64 && self.metadata.name != 'flotilla-operator'", KAFKA_USER_NAME_MESSAGE),
    ],
)

RESOURCES: tuple[Resource, ...] = (KAFKA_CLUSTER, CLIENT_QUOTA, RECORD_DELETION, KAFKA_TOPIC, KAFKA_USER)


def describe_errors(exc: ValidationError, prefix: str = "spec") -> str:
    """A ValidationError as one line per problem, each naming the field in Kubernetes spelling."""
    lines = []
    for err in exc.errors():
        path = prefix
        for part in err["loc"]:
            path += f"[{part}]" if isinstance(part, int) else f".{part}"
        msg = err["msg"].removeprefix("Value error, ")
        lines.append(f"{path}: {msg}")
    return "; ".join(lines)


def parse_spec(resource: Resource, spec: dict[str, Any]) -> ApiModel:
    """Validate a spec as the API server stored it; raise ValueError naming the bad field."""
    try:
        return resource.spec.model_validate(spec)
    except ValidationError as exc:
        raise ValueError(describe_errors(exc)) from exc


__all__ = [
    "API_VERSION",
    "ClientQuotaSpec",
    "KafkaClusterSpec",
    "KafkaTopicSpec",
    "KafkaUserSpec",
    "RecordDeletionSpec",
    "RESOURCES",
    "parse_spec",
]
