"""Catch-up mode's restart plan for the dead-letter query, on checkpoint files as Spark writes them."""

import json
from pathlib import Path

import pytest

from flotilla.catchup.ranges import PartitionRanges
from pipeline.gaps import CatchUpStateError, GapLedger, checkpoint_offsets, ledger_path, plan_restart, refuse_open_ranges

TOPIC = "events"


def spark_batch(query_dir: Path, batch: int, offsets: dict[int, int], committed: bool = True) -> None:
    """offsets/N (version, batch metadata, one line per source) and, if committed, commits/N."""
    (query_dir / "offsets").mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1, "conf": {"spark.sql.shuffle.partitions": "2"}}
    source = {TOPIC: {str(p): o for p, o in offsets.items()}}
    (query_dir / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(source)}")
    if committed:
        (query_dir / "commits").mkdir(exist_ok=True)
        (query_dir / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def spark_start(query_dir: Path, offsets: dict[int, int]) -> None:
    """sources/0/0: the Kafka source's initial offsets (a NUL byte, a version line, JSON)."""
    (query_dir / "sources" / "0").mkdir(parents=True, exist_ok=True)
    (query_dir / "sources" / "0" / "0").write_text("\x00v1\n" + json.dumps({TOPIC: {str(p): o for p, o in offsets.items()}}))


def ranges(ledger: GapLedger) -> dict[int, list[str]]:
    return {int(p): v for p, v in ledger.describe().items()}


def test_the_last_committed_batch_counts_not_a_planned_one(tmp_path):
    q = tmp_path / "dead-letters"
    assert checkpoint_offsets(q, TOPIC) is None
    spark_start(q, {0: 0, 1: 0})
    assert checkpoint_offsets(q, TOPIC) == {0: 0, 1: 0}
    spark_batch(q, 0, {0: 40, 1: 30})
    spark_batch(q, 1, {0: 70, 1: 50})
    spark_batch(q, 2, {0: 90, 1: 60}, committed=False)  # the kill interrupted it: Spark re-runs it
    assert checkpoint_offsets(q, TOPIC) == {0: 70, 1: 50}


def test_a_query_that_never_ran_starts_as_in_plain_mode(tmp_path):
    plan = plan_restart(tmp_path, TOPIC, {0: 120})
    assert plan.starting_offsets is None and plan.new_gap == {} and plan.ledger.done()


def test_kip_examples_crash_then_a_second_crash_while_the_gap_is_open(tmp_path):
    q = tmp_path / "dead-letters"
    spark_batch(q, 7, {0: 70})
    plan = plan_restart(tmp_path, TOPIC, {0: 120})
    # Crash with 70 committed and the log at 120: the stream starts at 120, the gap 70-120 is a range.
    assert plan.starting_offsets == {0: 120} and plan.new_gap == {0: (70, 120)}
    assert ranges(plan.ledger) == {0: ["70-120@70"]}
    assert not q.exists(), "the old checkpoint must go, or Spark would resume at 70"
    assert ranges(GapLedger.load(ledger_path(tmp_path), TOPIC)) == {0: ["70-120@70"]}  # durable
    # The worker got to 90; the new stream committed 140; crash again with the log at 190.
    plan.ledger.partitions[0].commit(90)
    plan.ledger.save()
    spark_start(q, {0: 120})
    spark_batch(q, 0, {0: 140})
    plan = plan_restart(tmp_path, TOPIC, {0: 190})
    assert plan.starting_offsets == {0: 190} and plan.new_gap == {0: (140, 190)}
    assert ranges(plan.ledger) == {0: ["70-120@90", "140-190@140"]}
    assert plan.ledger.records_left() == 30 + 50


def test_crash_between_the_file_and_the_checkpoint_replacement(tmp_path):
    q = tmp_path / "dead-letters"
    spark_batch(q, 3, {0: 70})
    ledger = GapLedger(ledger_path(tmp_path), TOPIC)
    ledger.partitions[0] = PartitionRanges(70)
    ledger.partitions[0].recover(120)
    ledger.save()  # ... and the old checkpoint (still at 70) was not replaced
    plan = plan_restart(tmp_path, TOPIC, {0: 130})
    assert plan.starting_offsets == {0: 130}
    assert ranges(plan.ledger) == {0: ["70-130@70"]}, "the new gap touches the recorded one: one range"


def test_a_replaced_checkpoint_that_never_planned_a_batch_starts_where_the_file_says(tmp_path):
    spark_batch(tmp_path / "dead-letters", 1, {0: 70})
    plan_restart(tmp_path, TOPIC, {0: 120})
    (tmp_path / "dead-letters" / "metadata").parent.mkdir()
    (tmp_path / "dead-letters" / "metadata").write_text('{"id":"x"}')  # killed before its first batch
    plan = plan_restart(tmp_path, TOPIC, {0: 120})
    assert plan.starting_offsets == {0: 120}, "Spark would start a checkpoint without offsets at the earliest"
    assert ranges(plan.ledger) == {0: ["70-120@70"]}


def test_caught_up_exactly_keeps_the_checkpoint(tmp_path):
    q = tmp_path / "dead-letters"
    spark_batch(q, 4, {0: 50, 1: 60})
    plan = plan_restart(tmp_path, TOPIC, {0: 50, 1: 60})
    assert plan.starting_offsets is None and q.exists() and plan.ledger.done()


def test_a_partition_without_a_gap_starts_where_it_was_and_a_new_one_at_the_earliest(tmp_path):
    spark_batch(tmp_path / "dead-letters", 4, {0: 50, 1: 60})
    plan = plan_restart(tmp_path, TOPIC, {0: 80, 1: 60, 2: 10})
    assert plan.starting_offsets == {0: 80, 1: 60, 2: -2}
    assert plan.new_gap == {0: (50, 80)}


def test_plain_mode_refuses_while_ranges_are_open(tmp_path):
    refuse_open_ranges(tmp_path, TOPIC)  # no file: fine
    spark_batch(tmp_path / "dead-letters", 1, {0: 70})
    plan = plan_restart(tmp_path, TOPIC, {0: 120})
    with pytest.raises(CatchUpStateError, match="--catch-up parallel"):
        refuse_open_ranges(tmp_path, TOPIC)
    plan.ledger.partitions[0].commit(120)
    plan.ledger.save()
    refuse_open_ranges(tmp_path, TOPIC)


def test_a_file_of_another_topic_is_refused(tmp_path):
    spark_batch(tmp_path / "dead-letters", 1, {0: 70})
    plan_restart(tmp_path, TOPIC, {0: 120})
    with pytest.raises(CatchUpStateError, match="not 'other'"):
        GapLedger.load(ledger_path(tmp_path), "other")
