"""The RecordDeletion policy as pure functions (builders/record_deletion.py): targets per partition,
the keep margin, never backwards, nothing twice, the schedule and the status."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from flotilla_operator.builders import record_deletion as rd
from flotilla_operator.api.record_deletion import RecordDeletionSpec

NOW = datetime(2026, 11, 25, 12, 0, tzinfo=timezone.utc)


def spec(**kw):
    return RecordDeletionSpec.model_validate({"clusterRef": {"name": "demo"}, "topic": "t", **kw})


def test_durations():
    assert rd.parse_duration("1h30m") == timedelta(minutes=90)
    assert rd.parse_duration("250ms") == timedelta(milliseconds=250)
    with pytest.raises(ValueError):
        rd.parse_duration("10 m")
    assert rd.interval_of(spec(before={"offset": 1})) is None
    assert rd.interval_of(spec(before={"offset": 1}, interval="30s")) == timedelta(seconds=30)
    with pytest.raises(rd.PlanError) as err:
        rd.interval_of(spec(before={"offset": 1}, interval="500ms"))
    assert "spec.interval" in err.value.message and not err.value.retry


def test_partitions_are_checked_against_the_topic():
    assert rd.chosen_partitions(spec(before={"offset": 1}), 3) == [0, 1, 2]
    assert rd.chosen_partitions(spec(before={"offset": 1}, partitions=[2, 0]), 3) == [0, 2]
    with pytest.raises(rd.PlanError) as err:
        rd.chosen_partitions(spec(before={"offset": 1}, partitions=[1, 3, 7]), 3)
    assert err.value.reason == "PartitionNotFound"
    assert "spec.partitions" in err.value.message and "3, 7" in err.value.message


def test_timestamp_without_a_newer_record_means_the_high_watermark():
    offsets = {0: rd.Offsets(0, 10), 1: rd.Offsets(0, 4)}
    assert rd.timestamp_targets({0: 6, 1: -1}, offsets) == {0: 6, 1: 4}


def test_consumed_by_takes_the_least_commit_and_leaves_uncommitted_partitions_alone():
    committed = {"etl": {0: 50, 1: 30, 2: None}, "audit": {0: 20, 1: 40, 2: 9}}
    targets, skipped = rd.consumed_targets(committed, [0, 1, 2])
    assert targets == {0: 20, 1: 30}
    assert 2 not in targets and "etl" in skipped[2] and "audit" not in skipped[2]
    # -1 (OffsetFetch's "no offset") is the same as never committed, never "delete everything".
    targets, skipped = rd.consumed_targets({"etl": {0: -1}}, [0])
    assert targets == {} and 0 in skipped


def test_keep_margins():
    assert rd.keep_records({0: 100, 1: 3}, 10) == {0: 90, 1: 0}
    assert rd.keep_newer_than({0: 100, 1: 30}, {0: 80, 1: 50}) == {0: 80, 1: 30}


def test_plan_never_moves_back_and_clips_to_the_high_watermark():
    offsets = {0: rd.Offsets(10, 100), 1: rd.Offsets(50, 60), 2: rd.Offsets(0, 20)}
    todo = rd.plan({0: 40, 1: 30, 2: 500}, offsets)
    assert todo.requests == {0: 40, 2: 20}  # 1 is already past 30: nothing asked, nothing moved back
    # Applying again once the log starts moved asks for nothing.
    after = {0: rd.Offsets(40, 100), 1: rd.Offsets(50, 60), 2: rd.Offsets(20, 20)}
    assert rd.plan({0: 40, 1: 30, 2: 500}, after).requests == {}


def test_partition_rows_count_deleted_records():
    before = {0: rd.Offsets(10, 100), 1: rd.Offsets(5, 5)}
    rows = rd.partition_rows([0, 1], before, {0: 40}, {1: "no committed offset from group(s) g"})
    assert rows == [{"partition": 0, "lowWatermark": 40, "recordsDeleted": 30},
                    {"partition": 1, "lowWatermark": 5, "recordsDeleted": 0, "error": "no committed offset from group(s) g"}]


def test_next_run_from_the_stored_status():
    ok = {"observedGeneration": 3, "lastRunTime": "2026-11-25T11:59:00Z",
          "conditions": [{"type": "Ready", "status": "True", "reason": "Deleted"}]}
    assert rd.next_run(interval=None, generation=3, status=ok, now=NOW) is None  # a one-off ran
    assert rd.next_run(interval=None, generation=4, status=ok, now=NOW) == NOW  # a new spec runs
    assert rd.next_run(interval=timedelta(minutes=10), generation=3, status=ok, now=NOW) == NOW + timedelta(minutes=9)
    failed = {**ok, "conditions": [{"type": "Ready", "status": "False", "reason": "ClusterNotReady"}]}
    assert rd.next_run(interval=None, generation=3, status=failed, now=NOW) == NOW
    assert rd.next_run(interval=None, generation=1, status={}, now=NOW) == NOW


def test_backoff_doubles_and_is_capped():
    delays = [rd.backoff(n, None) for n in range(1, 12)]
    assert delays == sorted(delays) and delays[0] < delays[1] and delays[-1] == timedelta(seconds=rd.BACKOFF_MAX_S)
    assert rd.backoff(10, timedelta(seconds=30)) == timedelta(seconds=30)


def test_policy_summary():
    assert rd.policy_summary(spec(before={"offset": 7})) == "offset 7"
    assert rd.policy_summary(spec(before={"consumedBy": ["a", "b"]}, keep={"records": 5})) == "consumedBy a,b keep 5 records"
    assert rd.policy_summary(spec(before={"timestamp": "2026-01-01T00:00:00Z"}, keep={"duration": "1h"})) == \
        "timestamp 2026-01-01T00:00:00Z keep 1h"


def test_run_status_adds_up_and_reports():
    rows = [{"partition": 0, "lowWatermark": 40, "recordsDeleted": 30}]
    first = rd.run_status(previous={}, generation=1, policy="offset 40", now=NOW, ran=True, rows=rows,
                          deleted=30, error=None, next_time=NOW + timedelta(minutes=1))
    assert first["recordsDeleted"] == 30 and first["lastRunTime"] == "2026-11-25T12:00:00Z"
    assert first["nextRunTime"] == "2026-11-25T12:01:00Z" and first["policy"] == "offset 40"
    assert first["conditions"][0]["reason"] == "Deleted" and first["partitions"] == rows
    again = rd.run_status(previous=first, generation=1, policy="offset 40", now=NOW, ran=True,
                          rows=[{**rows[0], "recordsDeleted": 0}], deleted=0, error=None, next_time=None)
    assert again["recordsDeleted"] == 30 and "nothing to delete" in again["conditions"][0]["message"]
    err = rd.PlanError("GroupNotFound", "spec.before.consumedBy: consumer group(s) x do not exist")
    failed = rd.run_status(previous=first, generation=2, policy="consumedBy x", now=NOW, ran=True, rows=[],
                           deleted=0, error=err, next_time=NOW)
    c = failed["conditions"][0]
    assert (c["status"], c["reason"]) == ("False", "GroupNotFound") and "consumedBy" in c["message"]
    assert "partitions" not in failed  # the rows of the last run that read them stay (merge patch)


def test_delete_errors_as_reasons():
    assert rd.error_reason("REQUEST_TIMED_OUT") == "NotEnoughReplicas"
    assert rd.error_reason("UNKNOWN_TOPIC_OR_PARTITION") == "TopicNotFound"
    assert rd.error_reason("SOMETHING_ELSE") == "DeleteFailed"
