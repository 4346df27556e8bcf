"""The catch-up consumer's progress numbers and line, from range states and deliveries."""

from flotilla.catchup.progress import Progress, progress_line
from flotilla.catchup.ranges import PartitionRanges


def test_progress_counts_ranges_records_left_rate_and_freshness():
    now = [1000.0]
    p = Progress(clock=lambda: now[0])
    a = PartitionRanges.from_commit(70, "")
    a.recover(120)
    a.commit(90)
    b = PartitionRanges.from_commit(140, "kip333/1:10-40@30")
    b.recover(190)
    p.delivered("catchup", 999_000)
    now[0] = 1002.0
    p.delivered("catchup", 998_000)
    p.delivered("primary", 1_001_500)
    snap = p.snapshot([a, b])
    assert snap["open_ranges"] == 3
    assert snap["records_left_in_gaps"] == 30 + 10 + 50
    assert snap["catchup_rate_per_s"] == 1.0          # 2 gap records over 2 s
    assert snap["freshness_s"] == 0.5                  # newest record delivered is 0.5 s old
    assert (snap["delivered_primary"], snap["delivered_catchup"]) == (1, 2)
    line = progress_line(snap)
    assert "3 open range(s), 90 record(s) left" in line and "freshness 0.50s" in line


def test_progress_before_anything_was_delivered():
    snap = Progress(clock=lambda: 5.0).snapshot([])
    assert snap["freshness_s"] is None and snap["catchup_rate_per_s"] == 0.0
    assert "freshness n/a" in progress_line(snap)
