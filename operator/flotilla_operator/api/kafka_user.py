"""KafkaUser: a SCRAM or TLS user of a cluster, its ACLs and quotas (Strimzi's convention).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, model_validator

from .common import AGE_COLUMN, ApiModel, ClusterReference, Condition, MESSAGE_COLUMN, Resource, cel, ready_columns

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
        *ready_columns(),
        MESSAGE_COLUMN,
        AGE_COLUMN,
    ],
    root_validations=[
        cel("self.metadata.name.size() <= 64 && self.metadata.name != 'flotilla-operator'", KAFKA_USER_NAME_MESSAGE),
    ],
)
