"""KafkaTopic: a topic as cluster metadata, written by users or the brokers; its size limit follows the
brokers' own sizing of the object (broker/metadata/kube_objects.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, Field, model_validator

from .common import AGE_COLUMN, ApiModel, Condition, Resource, TOPIC_PATTERN, cel, ready_columns

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
        *ready_columns(),
        {"name": "Topic-ID", "type": "string", "jsonPath": ".status.topicId", "priority": 1},
        AGE_COLUMN,
    ],
    root_validations=[
        cel(TOPIC_NAME_IMMUTABLE_RULE, TOPIC_NAME_IMMUTABLE_MESSAGE, ".spec.topicName"),
        cel(TOPIC_ID_KEPT_RULE, TOPIC_ID_KEPT_MESSAGE, ".status.topicId"),
        cel(ASSIGNMENT_KEPT_RULE, ASSIGNMENT_KEPT_MESSAGE, ".status.assignment"),
    ],
    # Status through /status only: a user's PUT of the resource cannot drop what the brokers own.
    status_subresource=True,
)
