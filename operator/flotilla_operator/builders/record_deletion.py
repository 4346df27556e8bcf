"""Pure functions from a validated RecordDeletion to the offsets DeleteRecords must be given (KIP-107).

A run reads the partitions' log start and high watermark, resolves the policy into a target offset
per partition (an offset, a timestamp's first offset, or the least offset the named groups
committed), subtracts the optional `keep` margin, and asks only for partitions whose target is
above their log start: a log start never moves back, and a second run with the same inputs asks
for nothing. Anything that would make the answer "delete everything" by accident (a group that
does not exist, a partition a group never committed) is an error or a partition left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Mapping

from ..api.record_deletion import RecordDeletionSpec

# Backoff for runs that failed for a reason that may pass (cluster not Ready, unreachable, ...).
BACKOFF_FIRST_S = 2.0
BACKOFF_MAX_S = 300.0
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


class PlanError(Exception):
    """A run cannot go on: `reason` is the condition's reason, the message names the field or object."""

    def __init__(self, reason: str, message: str, *, retry: bool = True) -> None:
        super().__init__(message)
        self.reason, self.message, self.retry = reason, message, retry


@dataclass(frozen=True)
class Offsets:
    """One partition as its leader reports it before the run."""

    log_start: int
    high_watermark: int


@dataclass
class Plan:
    """What to ask DeleteRecords for, and the partitions left alone (with why)."""

    requests: dict[int, int] = field(default_factory=dict)
    skipped: dict[int, str] = field(default_factory=dict)


def parse_duration(text: str) -> timedelta:
    """A Go-style duration (models.DURATION_PATTERN: 90s, 1h30m, 500ms) as a timedelta."""
    parts = re.findall(r"([0-9]+)(ms|s|m|h)", text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a duration: {text!r}")
    return timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in parts))


def interval_of(spec: RecordDeletionSpec) -> timedelta | None:
    """The run interval, or None for a one-off; an interval below a second is refused (it would spin)."""
    if spec.interval is None:
        return None
    interval = parse_duration(spec.interval)
    if interval < timedelta(seconds=1):
        raise PlanError("InvalidSpec", f"spec.interval: {spec.interval} is below the minimum of 1s", retry=False)
    return interval


def policy_summary(spec: RecordDeletionSpec) -> str:
    """The policy in one line, for the Policy printer column."""
    b = spec.before
    if b.offset is not None:
        text = f"offset {b.offset}"
    elif b.timestamp is not None:
        text = f"timestamp {b.timestamp.astimezone(timezone.utc).strftime('%Y-%m-%dT%H:%M:%SZ')}"
    else:
        text = f"consumedBy {','.join(b.consumed_by or ())}"
    if spec.keep is not None:
        text += f" keep {spec.keep.records} records" if spec.keep.records is not None else f" keep {spec.keep.duration}"
    return text


def chosen_partitions(spec: RecordDeletionSpec, partition_count: int) -> list[int]:
    """spec.partitions, each checked against the topic, or every partition when unset."""
    if spec.partitions is None:
        return list(range(partition_count))
    missing = sorted(p for p in spec.partitions if p >= partition_count)
    if missing:
        raise PlanError("PartitionNotFound",
                        f"spec.partitions: partition(s) {', '.join(map(str, missing))} do not exist: topic "
                        f"{spec.topic} has {partition_count} partition(s)", retry=False)
    return sorted(set(spec.partitions))


def timestamp_ms(when: datetime) -> int:
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return int(when.timestamp() * 1000)


def timestamp_targets(found: Mapping[int, int], offsets: Mapping[int, Offsets]) -> dict[int, int]:
    """ListOffsets-by-timestamp answers (the first offset at or after the time; -1: no record that
    new) as targets: below the found offset, or below the high watermark when every record is older."""
    return {p: (o if o >= 0 else offsets[p].high_watermark) for p, o in found.items()}


def consumed_targets(committed: Mapping[str, Mapping[int, int | None]], partitions: list[int]) -> tuple[dict[int, int], dict[int, str]]:
    """Per partition the least offset the groups committed; a partition one of them never committed
    (None or negative) is left alone, with the groups that did not commit named."""
    targets: dict[int, int] = {}
    skipped: dict[int, str] = {}
    for p in partitions:
        absent = sorted(g for g, offs in committed.items() if offs.get(p) is None or int(offs[p]) < 0)
        if absent:
            skipped[p] = f"no committed offset from group(s) {', '.join(absent)}"
        else:
            targets[p] = min(int(offs[p]) for offs in committed.values())  # type: ignore[arg-type]
    return targets, skipped


def keep_records(targets: Mapping[int, int], records: int) -> dict[int, int]:
    """Keep `records` records behind each target."""
    return {p: max(0, t - records) for p, t in targets.items()}


def keep_newer_than(targets: Mapping[int, int], bounds: Mapping[int, int]) -> dict[int, int]:
    """Keep what the keep duration covers: `bounds` is, per partition, the first offset written
    within it (already mapped by timestamp_targets), so no target may pass it."""
    return {p: min(t, bounds.get(p, t)) for p, t in targets.items()}


def plan(targets: Mapping[int, int], offsets: Mapping[int, Offsets], skipped: Mapping[int, str] | None = None) -> Plan:
    """Clip each target to the high watermark (DeleteRecords refuses beyond it) and keep only the
    partitions it would move forward: never backwards, and nothing twice."""
    out = Plan(skipped=dict(skipped or {}))
    for p, t in sorted(targets.items()):
        state = offsets[p]
        target = min(t, state.high_watermark)
        if target > state.log_start:
            out.requests[p] = target
    return out


def partition_rows(partitions: list[int], before: Mapping[int, Offsets], low_watermarks: Mapping[int, int],
                   errors: Mapping[int, str]) -> list[dict[str, Any]]:
    """Status rows: the low watermark each partition reached and the records the run deleted."""
    rows = []
    for p in partitions:
        start = before[p].log_start
        low = max(start, int(low_watermarks.get(p, start)))
        row: dict[str, Any] = {"partition": p, "lowWatermark": low, "recordsDeleted": low - start}
        if p in errors:
            row["error"] = errors[p]
        rows.append(row)
    return rows


def next_run(*, interval: timedelta | None, generation: int, status: Mapping[str, Any], now: datetime) -> datetime | None:
    """When the next run is due from the stored status (so an operator restart neither runs early
    nor forgets): now for a new generation or a failed last run; a one-off that succeeded never
    runs again; otherwise lastRunTime + interval."""
    ready = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})
    # The Ready condition's generation is the one that ran (a paused resource's status has seen a
    # newer generation without running it).
    ran_for = ready.get("observedGeneration", status.get("observedGeneration"))
    if ran_for != generation or ready.get("status") != "True":
        return now
    last = _parse(status.get("lastRunTime"))
    if interval is None:
        return None
    if last is None:
        return now
    return last + interval


def backoff(attempt: int, interval: timedelta | None) -> timedelta:
    """Delay after the attempt-th failure in a row (1, 2, ...): doubling, capped by the maximum and
    by the interval (a standing policy never waits longer than it would have anyway)."""
    seconds = min(BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, attempt - 1))
    if interval is not None:
        seconds = min(seconds, interval.total_seconds())
    return timedelta(seconds=seconds)


def _parse(text: Any) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def error_reason(code_name: str) -> str:
    """A DeleteRecords partition error as a condition reason."""
    return {
        "REQUEST_TIMED_OUT": "NotEnoughReplicas",  # the low watermark did not reach the target in time
        "NOT_ENOUGH_REPLICAS": "NotEnoughReplicas",
        "UNKNOWN_TOPIC_OR_PARTITION": "TopicNotFound",
        "_UNKNOWN_PARTITION": "TopicNotFound",
        "_UNKNOWN_TOPIC": "TopicNotFound",
        "POLICY_VIOLATION": "PolicyViolation",
    }.get(code_name, "DeleteFailed")


def run_status(*, previous: Mapping[str, Any], generation: int, policy: str | None, now: datetime,
               ran: bool, rows: list[dict[str, Any]] | None, deleted: int, error: PlanError | None,
               next_time: datetime | None) -> dict[str, Any]:
    """The status after one attempt. `ran`: the cluster was reached (lastRunTime moves);
    recordsDeleted adds this run's count to the total; rows of a failed attempt replace the old
    ones only when the attempt got as far as reading the partitions. Stalled is True for an error
    no retry fixes (an invalid spec)."""
    from ..status import condition, stalled_condition

    if error is None:
        moved = [r for r in rows or () if r["recordsDeleted"]]
        message = (f"deleted {deleted} record(s) from {len(moved)} partition(s)" if deleted
                   else "nothing to delete: every chosen partition already starts at or above its target")
        left = [r for r in rows or () if r.get("error")]
        if left:
            message += f"; left alone: " + "; ".join(f"partition {r['partition']}: {r['error']}" for r in left)
        ready = condition("Ready", True, "Deleted", message, generation=generation, now=now,
                          previous=previous.get("conditions"))
    else:
        ready = condition("Ready", False, error.reason, error.message, generation=generation, now=now,
                          previous=previous.get("conditions"))
    stalled = stalled_condition(error.reason if error is not None and not error.retry else None,
                                error.message if error is not None else "", generation=generation, now=now,
                                previous=previous.get("conditions"), force=True)
    status: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": [ready, stalled],
        "recordsDeleted": int(previous.get("recordsDeleted") or 0) + deleted,
        "nextRunTime": _ts(next_time),
    }
    if policy is not None:
        status["policy"] = policy
    if ran:
        status["lastRunTime"] = _ts(now)
    if rows:
        status["partitions"] = rows
    return status


def _ts(when: datetime | None) -> str | None:
    return None if when is None else when.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
