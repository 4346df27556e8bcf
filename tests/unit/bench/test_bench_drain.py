"""bench/commands/drain.py's plans and report: broker 3 in every partition, a drain that replaces it in
place keeping the replication factor, the least time a KIP-73 throttle allows, latency windows by
send time, ratios only where both targets measured, and a side that could not run says why."""

from __future__ import annotations

import pytest

from bench.commands import drain_plan
from bench.commands.drain import Params
from bench.commands.drain_report import render, rows


def test_layout_puts_the_drained_broker_in_every_partition_and_leads_half():
    layout = drain_plan.initial_layout([2, 3, 1], 8)
    assert all(3 in rs and len(set(rs)) == 2 for rs in layout.values())
    leaders = [rs[0] for rs in layout.values()]
    assert leaders.count(3) == 4 and leaders.count(1) == 2 and leaders.count(2) == 2
    with pytest.raises(ValueError):
        drain_plan.initial_layout([1, 2], 4)


def test_drain_plan_replaces_the_broker_in_place_with_the_one_unused():
    layout = {0: [3, 1], 1: [2, 3], 2: [1, 2]}
    assert drain_plan.drain_plan(layout, 3, [1, 2, 3]) == {0: [2, 1], 1: [2, 1]}  # partition 2 holds nothing of 3
    with pytest.raises(ValueError, match="nowhere to go"):
        drain_plan.drain_plan({0: [1, 2, 3]}, 3, [1, 2, 3])


def test_plan_json_is_the_tools_reassignment_file():
    assert drain_plan.plan_json("t", {1: [2, 1], 0: [1, 2]}) == {"version": 1, "partitions": [
        {"topic": "t", "partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]},
        {"topic": "t", "partition": 1, "replicas": [2, 1], "log_dirs": ["any", "any"]}]}


def test_throttle_floor_is_the_busiest_brokers_bytes_over_the_rate():
    layout = drain_plan.initial_layout([1, 2, 3], 4)  # [3,1] [3,2] [1,3] [2,3]
    plan = drain_plan.drain_plan(layout, 3, [1, 2, 3])  # [2,1] [1,2] [1,2] [2,1]
    leaders = {p: rs[0] for p, rs in layout.items()}
    f = drain_plan.throttle_floor(leaders, layout, plan, {0: 100, 1: 100, 2: 100, 3: 100}, rate=10)
    assert f["leader_out_bytes"] == {3: 200, 1: 100, 2: 100}  # broker 3 sends two partitions
    assert f["follower_in_bytes"] == {2: 200, 1: 200}
    assert f["floor_s"] == 20.0


def test_windows_select_by_send_time():
    sent, lat = [1.0, 2.0, 3.0, 4.0], [0.1, 0.2, 0.3, 0.4]
    assert drain_plan.window(sent, lat, 2.0, 4.0) == [0.2, 0.3]


def _result(apache: dict) -> dict:
    flotilla = {"unavailable": None, "errors": [], "victim": 3,
                "cases": {"unthrottled": {"seconds": 10.0, "before_p99_ms": 4.0, "during_p99_ms": 8.0,
                                          "victim_bytes": 2 ** 30, "victim_bytes_after": 0, "tool_seconds": 2.0},
                          "throttled": {"seconds": 30.0, "floor_s": 20.0, "seconds_over_floor": 1.5,
                                        "throttle_cleared": True}},
                "producer": {"sent": 100, "acked": 100, "errors": 0}}
    return {"when": "2026-11-26 18:00 UTC", "machine": {"cores": 2, "cpu_model": "test"},
            "settings": {**Params().__dict__, "replication_factor": 2, "linger_ms": 5},
            "targets": {"flotilla": flotilla, "apache": apache}}


def test_ratios_only_where_both_measured():
    r = {(x["case"], x["metric"]): x for x in rows(_result(
        {"unavailable": None, "errors": [], "cases": {"unthrottled": {"seconds": 20.0, "during_p99_ms": 0}}}))}
    assert r[("unthrottled", "seconds")]["ratio"] == 0.5
    assert r[("unthrottled", "during_p99_ms")]["ratio"] is None  # Kafka's 0 is no denominator
    assert r[("throttled", "seconds")]["ratio"] is None  # Kafka did not measure it
    assert ("unthrottled", "floor_s") not in r and ("throttled", "floor_s") in r


def test_a_side_that_cannot_run_says_why():
    md = render(_result({"cases": {}, "unavailable": "no Java 17+ on PATH", "errors": []}))
    assert "**Apache Kafka did not run:** no Java 17+ on PATH" in md
    assert "broker 3 held 1,024 MiB of the topic's segments, 0 MiB once settled" in md
    assert "throttles cleared by --verify" in md
    line = next(x for x in md.splitlines() if x.startswith("| unthrottled | drain time"))
    assert "| 10 | – | – |" in line


def test_peak_rate_is_the_fastest_growth_over_the_span():
    samples = [(0.0, 0), (1.0, 10), (2.0, 50), (3.0, 60), (4.0, 60)]
    assert drain_plan.peak_rate(samples, 2.0) == 25.0  # 1 s -> 3 s: 50 bytes in 2 s
    assert drain_plan.peak_rate(samples, 5.0) is None  # the samples cover 4 s only
    assert drain_plan.peak_rate([], 1.0) is None


def test_leader_changes_are_the_polls_where_some_leader_differs():
    seen = [(0.0, {0: 3, 1: 1}), (0.2, {0: 3, 1: 1}), (0.4, {0: 2, 1: 1}), (0.6, {0: 2, 1: 1, 2: 1}),
            (0.8, {0: 2, 1: 2, 2: 2})]
    assert drain_plan.leader_changes(seen) == [0.4, 0.8]  # partition 2 first seen at 0.6: no change
    assert drain_plan.leader_changes(seen[:1]) == []


def test_records_near_a_leader_change_are_told_apart():
    sent = [1.0, 4.5, 5.5, 7.9, 8.0, 9.5]
    lat = [0.01, 0.02, 0.9, 0.5, 0.03, 0.04]
    near, away = drain_plan.split_near(sent, lat, 1.0, 9.0, [5.0])  # near: [4.0, 8.0)
    assert near == [0.02, 0.9, 0.5] and away == [0.01, 0.03]  # 9.5 is after the window
    assert drain_plan.split_near(sent, lat, 0.0, 10.0, []) == ([], lat)
