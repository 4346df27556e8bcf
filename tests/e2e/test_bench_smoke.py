"""The benchmark harness runs end to end (`python -m bench --smoke`): tiny record counts, one
round. It checks that the result files are written with the expected structure; it measures nothing
and asserts no timings. `make test` runs Flotilla's side only; the Kafka-reference run
(`make interop-apache`, --kafka-target=apache) runs both sides and checks the ratios, so the
cold `make test` does not start Apache Kafka for a harness check."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_bench_smoke(tmp_path: Path, kafka_target: str) -> None:
    out = tmp_path / "results"
    targets = "flotilla,apache" if kafka_target == "apache" else "flotilla"
    cmd = [sys.executable, "-m", "bench", "--smoke", "--no-fetch", "--targets", targets, "--out", str(out),
           "--name", "smoke", "--workdir", str(tmp_path / "runs")]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=540)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"

    data = json.loads((out / "smoke.json").read_text())
    for key in ("machine", "settings", "targets", "load", "results", "failures", "skipped", "smoke"):
        assert key in data, key
    assert data["smoke"] is True
    assert set(data["targets"]) == set(targets.split(",")), data["targets"]
    for key in ("cpu_model", "cores", "memory_gb", "python", "apache_kafka", "clients", "date"):
        assert key in data["machine"], key
    assert data["machine"]["cores"] >= 1
    assert not data["failures"], json.dumps(data["failures"], indent=1)[:5000]

    rows = {(r["case"], r["metric"]): r for r in data["results"]}
    for r in data["results"]:
        for key in ("title", "unit", "better", "median", "samples", "ratio_flotilla_over_kafka"):
            assert key in r, key
        assert r["better"] in ("higher", "lower")
    # Cases that need no Java tool always run.
    for case, metric in [
        ("start", "ready_seconds"),
        ("produce-1KiB-acks1-p1-librdkafka", "mb_per_sec"),
        ("produce-1KiB-acksall-p1-librdkafka", "mb_per_sec"),
        ("produce-100B-acks1-p1-librdkafka", "mb_per_sec"),
        ("consume-1KiB-p1-librdkafka", "mb_per_sec"),
        ("memory-p1", "rss_peak_mb"),
        # issue 8's scale cases: small-batch fetch, produce latency while segments roll, Metadata
        ("fetch-small-100B-p1-librdkafka", "mb_per_sec"),
        ("roll-latency-100B-p1-librdkafka", "latency_p99_ms"),
        ("metadata-all-topics-p1", "latency_p50_ms"),
        ("fetch-sessions-idle-200p", "full_response_bytes"),
        ("fetch-sessions-idle-200p", "incremental_response_bytes"),
        # issue 19: transactions of 100 records, and read_committed end-to-end latency
        ("txn-produce-1KiB-p1-librdkafka", "mb_per_sec"),
        ("txn-latency-1KiB-p1-librdkafka", "latency_p50_ms"),
        # the KIP-333 catch-up consumer: a restart with a backlog, plain vs parallel, and the mode off
        ("catch-up-restart-p1", "plain_backlog_seconds"),
        ("catch-up-restart-p1", "parallel_backlog_seconds"),
        ("catch-up-restart-p1", "consumer_cpu_ratio"),
        ("catch-up-mode-off-p1", "mode_off_throughput_ratio"),
    ]:
        v = rows[(case, metric)]["median"]["flotilla"]
        assert isinstance(v, (int, float)) and v > 0, (case, metric, v)
    for r in data["results"]:
        if r["primary"] and r["median"].get("flotilla") is not None:
            assert r["median"]["flotilla"] >= 0, r
            if r["metric"] in ("mb_per_sec", "ready_seconds", "rss_peak_mb", "rss_idle_mb"):
                assert r["median"]["flotilla"] > 0, r
    roll = rows[("roll-latency-100B-p1-librdkafka", "segments")]["median"]["flotilla"]
    assert roll >= 1, "the roll-latency case must have written segments"
    if "apache" in data["targets"]:
        assert rows[("start", "ready_seconds")]["ratio_flotilla_over_kafka"] > 0
        for case, metric in [("fetch-small-100B-p1-librdkafka", "mb_per_sec"),
                             ("roll-latency-100B-p1-librdkafka", "latency_p99_ms"),
                             ("metadata-all-topics-p1", "latency_p50_ms")]:
            assert rows[(case, metric)]["ratio_flotilla_over_kafka"] > 0, (case, metric)
    # The catch-up case's runs: the whole backlog once per mode, fresh records after the restart
    # delivered in both, nothing twice (no crash in this case), the worker used in the parallel run.
    restart = rows[("catch-up-restart-p1", "fresh_age_p50_ratio")]["runs"]["flotilla"][0]["runs"]
    for mode in ("plain", "parallel"):
        assert restart[mode]["backlog_records"] >= 5000, restart[mode]
        assert restart[mode]["fresh_records"] > 0 and restart[mode]["duplicates"] == 0, restart[mode]
    assert restart["parallel"]["catchup_worker_created"] and not restart["plain"]["catchup_worker_created"]
    # Fetch sessions: an idle incremental fetch is a few dozen bytes, a full one names every partition.
    sessions = rows[("fetch-sessions-idle-200p", "incremental_bytes_pct")]["median"]["flotilla"]
    assert 0 < sessions < 5, sessions

    md = (out / "smoke.md").read_text()
    assert "| case | metric | Flotilla" in md
    assert "start-to-ready" in md
    if importlib.util.find_spec("matplotlib"):
        assert (out / "smoke.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.timeout(180)
@pytest.mark.flotilla_only("the security harness's own side-by-side run is `make bench-security`")
def test_bench_security_smoke(tmp_path: Path) -> None:
    """`python -m bench security` (issue 23) end to end on Flotilla with 1 s phases: both transports
    measured, the ACLs let the SASL_SSL user produce and consume, the report written. No timings."""
    out = tmp_path / "security"
    cmd = [sys.executable, "-m", "bench", "security", "--seconds", "1", "--warmup", "0.5", "--targets", "flotilla",
           "--out", str(out)]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=150)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}\n{proc.stderr[-5000:]}"
    assert "flotilla sasl_ssl: consume" in proc.stderr, "no progress lines"
    data = json.loads(out.with_suffix(".json").read_text())
    for transport in ("plaintext", "sasl_ssl"):
        for phase in ("produce", "consume"):
            result = data["results"]["flotilla"][transport][phase]
            assert "error" not in result and result["records"] > 0, (transport, phase, result)
    assert data["ratios"]["sasl_over_plain"]["flotilla"]["produce"] is not None
    assert "| flotilla | sasl_ssl | produce |" in out.with_suffix(".md").read_text()
