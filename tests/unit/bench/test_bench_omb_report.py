"""bench/commands/omb.py's report: nearest-rank percentiles over the merged samples of every client, ratios
Flotilla / Kafka only where both sides measured, and a side that could not run says why instead
of showing a number."""

from __future__ import annotations

from bench.commands.omb import Params, render, rows
from bench.harness.samples import pct, percentiles


def _result(apache: dict) -> dict:
    return {
        "when": "2026-11-26 09:00 UTC", "machine": {"cores": 2, "cpu_model": "test"},
        "settings": {**Params().__dict__, "failure_detection_ms": 9000}, "rates": {"omb": 5000.0},
        "targets": {
            "flotilla": {"cases": {"omb-max": {"produce_mb_per_sec": 30.0, "e2e_p99_ms": 10.0},
                                   "failover": {"lost": 0, "event": {"leaderless_s": 9.5, "victim": 2},
                                                "acked": 10, "delivery_errors": 0, "undelivered": 0,
                                                "verify": {"records_read": 10, "duplicates": 0}}},
                         "unavailable": None, "errors": []},
            "apache": apache,
        },
    }


def test_percentiles_are_nearest_rank_in_ms():
    xs = [i / 1000 for i in range(1, 1001)]  # 1..1000 ms
    assert pct(xs, 0.5) == 501.0
    assert pct(xs, 0.99) == 991.0
    assert pct([], 0.99) is None
    p = percentiles(list(reversed(xs)), "e2e")  # sorts its input
    assert p["e2e_p999_ms"] == 1000.0 and p["e2e_max_ms"] == 1000.0


def test_ratios_only_where_both_measured():
    r = {(x["case"], x["metric"]): x for x in rows(_result(
        {"cases": {"omb-max": {"produce_mb_per_sec": 20.0}, "failover": {"lost": 0, "event": {"leaderless_s": 19.0}}},
         "unavailable": None, "errors": []}))}
    assert r[("omb-max", "produce_mb_per_sec")]["ratio"] == 1.5
    assert r[("failover", "event.leaderless_s")]["ratio"] == 0.5
    assert r[("omb-max", "e2e_p99_ms")]["ratio"] is None  # Kafka has no value: no ratio
    assert r[("failover", "lost")]["ratio"] is None  # 0 / 0 is not a ratio


def test_a_side_that_cannot_run_says_why():
    md = render(_result({"cases": {}, "unavailable": "no Java 17+ on PATH", "errors": []}))
    assert "**Apache Kafka did not run:** no Java 17+ on PATH" in md
    assert "killed broker 2" in md and "10 read back (0 duplicates), 0 lost" in md
    line = next(x for x in md.splitlines() if "produce throughput, max" in x)
    assert "| 30.00 | – | – |" in line


def test_the_curve_is_a_row_per_offered_rate_with_both_brokers_and_their_ratio(tmp_path):
    from bench.commands import omb_curve

    def point(rate, p50):
        return {"offered_rate": rate, "produce_p50_ms": p50, "produce_p99_ms": 4 * p50, "produce_p999_ms": 9 * p50,
                "e2e_p50_ms": p50 + 50, "e2e_p99_ms": 4 * p50 + 50, "e2e_p999_ms": 9 * p50 + 50}

    result = _result({"cases": {"curve-10": point(6700.0, 200.0), "curve-75": point(50250.0, 400.0)},
                      "unavailable": None, "errors": []})
    result["targets"]["flotilla"]["cases"].update({"curve-10": point(6700.0, 100.0), "curve-75": point(50250.0, 600.0)})
    md = render(result)
    rows_md = [x for x in md.splitlines() if x.startswith("| 10%") or x.startswith("| 75%")]
    assert rows_md[0].startswith("| 10% | 6,700 | 100 / 200 (0.50×) |")
    assert rows_md[1].startswith("| 75% | 50,250 | 600 / 400 (1.50×) |")
    assert [c for _, c in omb_curve.cases(result)] == ["curve-10", "curve-75"]
    assert omb_curve.chart(result, tmp_path / "curve.png") and (tmp_path / "curve.png").stat().st_size > 0
