"""RecordDeletion (KIP-107): delete a topic's records before an offset, a time or what groups
committed, once or on a schedule.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field, field_validator, model_validator

from .common import (AGE_COLUMN, ApiModel, ClusterReference, Condition, DURATION_PATTERN, MESSAGE_COLUMN,
                     Resource, TOPIC_PATTERN, cel, ready_columns)

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
        *ready_columns(),
        MESSAGE_COLUMN,
        AGE_COLUMN,
    ],
)
