"""What every CRD model shares: the patterns, CEL rules, the camelCase base model, the references and
conditions, the Resource description the CRD renderer reads, and parsing a spec with field-named errors.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

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


def cel(rule: str, message: str, field_path: str | None = None) -> dict[str, str]:
    """One `x-kubernetes-validations` entry."""
    out = {"rule": rule, "message": message}
    if field_path:
        out["fieldPath"] = field_path
    return out


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


def ready_columns() -> list[dict[str, Any]]:
    return [
        {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
        {"name": "Reason", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].reason'},
    ]


AGE_COLUMN = {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
# With -o wide: why, in the operator's words (the Ready condition's message).
MESSAGE_COLUMN = {"name": "Message", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].message',
            "priority": 1}

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
