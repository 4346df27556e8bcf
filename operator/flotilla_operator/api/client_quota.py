"""ClientQuota (KIP-13, KIP-124): a user's or client-id's produce, fetch and request-time quota.
"""

from __future__ import annotations

from pydantic import ConfigDict, Field, model_validator

from .common import AGE_COLUMN, ApiModel, ClusterReference, Condition, MESSAGE_COLUMN, Resource, cel, ready_columns

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
        *ready_columns(),
        MESSAGE_COLUMN,
        AGE_COLUMN,
    ],
)
