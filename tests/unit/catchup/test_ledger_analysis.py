"""The kill -9 test's reading of its ledger (tests/support/catchup_ledger.py): duplicates a kill
explains (records past the last acknowledged commit) pass, a record processed again behind an
acknowledged commit, or twice in one assignment, is reported."""

from __future__ import annotations

from pathlib import Path

from tests.support.catchup_ledger import Ledger, checkpoint_analysis


def lives_of(tmp_path: Path, text: str) -> list[list[tuple]]:
    path = tmp_path / "ledger.txt"
    path.write_text(text)
    return Ledger(path).lives()


def test_a_kill_redelivers_only_what_was_not_acknowledged(tmp_path):
    lives = lives_of(tmp_path, "\n".join([
        "start 1",
        'assigned {"0": {"primary": -1001, "ranges": []}}',
        "rec primary 0 0 0", 'ack [0, 1, ""]',
        "rec primary 0 1 1", 'ack [0, 2, ""]',
        "rec primary 0 2 2",                       # killed before its commit was acknowledged
        "rec primary 0 3 3",
        "start 2",
        'assigned {"0": {"primary": 6, "ranges": [[2, 6, 2]]}}',
        "rec primary 0 6 6", 'ack [0, 7, "kip333/1:2-6@2"]',
        "rec catchup 0 2 2", 'ack [0, 7, "kip333/1:2-6@3"]',
        "rec catchup 0 3 3", 'ack [0, 7, "kip333/1:2-6@4"]',
        "rec catchup 0 4 4", "rec catchup 0 5 5", 'ack [0, 7, "kip333/1:2-6@5"]', 'ack [0, 7, ""]',
    ]))
    problems, per_life = checkpoint_analysis(lives)
    assert problems == []
    assert per_life[0] == {"life": 1, "processed": 4, "acks": 2, "unacknowledged_at_end": 2,
                           "unacknowledged_at_reassignments": 0}
    assert per_life[1]["unacknowledged_at_end"] == 0


def test_a_range_read_again_behind_an_acknowledged_commit_is_reported(tmp_path):
    lives = lives_of(tmp_path, "\n".join([
        "start 1",
        'assigned {"0": {"primary": 4, "ranges": [[0, 4, 0]]}}',
        "rec catchup 0 0 0", "rec catchup 0 1 1", 'ack [0, 4, "kip333/1:0-4@2"]',
        "start 2",
        'assigned {"0": {"primary": 4, "ranges": [[0, 4, 0]]}}',   # the progress was lost
        "rec catchup 0 0 0",
    ]))
    problems, _ = checkpoint_analysis(lives)
    assert len(problems) == 1 and "life 2: catchup processed 0:0 although an acknowledged commit" in problems[0]


def test_a_record_twice_in_one_assignment_is_reported(tmp_path):
    lives = lives_of(tmp_path, "\n".join([
        "start 1", 'assigned {"0": {"primary": 0, "ranges": []}}',
        "rec primary 0 0 0", "rec primary 0 0 0",
        'assigned {"0": {"primary": 0, "ranges": []}}', "rec primary 0 0 0",   # a rebalance: allowed
    ]))
    problems, per_life = checkpoint_analysis(lives)
    assert problems == ["life 1: 0:0 processed twice in one assignment"]
    assert per_life[0]["unacknowledged_at_reassignments"] == 1
