"""`pipeline run --catch-up parallel` end to end: crashes, fresh dead letters first, the gap beside.

One scenario on one broker (Flotilla, or Apache Kafka with `--kafka-target=apache`), run once by a
module fixture and checked by the tests below:

1. the generator writes FIRST events (about one in six malformed); the pipeline starts in catch-up
   mode (no checkpoint yet: from the earliest offsets, as in plain mode) and is killed with SIGKILL
   (Python driver and Spark's JVM) once its dead-letter query has committed a batch with raw
   records still waiting;
2. BACKLOG more events are written while it is down, then a steady producer starts (RATE events/s);
3. the pipeline restarts: the dead-letter query starts at the log end, a bounded job works through
   the gap in chunks. It is killed again once the gap job has finished a chunk and the dead-letter
   query has written dead letters of fresh records while the gap is still open;
4. it restarts a second time (the first range resumes from its progress, the second crash added a
   second range); the steady producer stops once it is up, and the run ends when the gap is done
   and both queries are idle.

Then: every malformed event is in the dead-letter topic (at-least-once: copies counted, each
byte-identical), fresh dead letters were written before the gap's last ones, the aggregates query
(which keeps order) wrote exactly the windows plain Python computes from the events, no window
twice with different values, and the pipeline's consumer group never passed an open range and ends
at the raw topic's end. Three Spark start-ups: about 60 s on an idle two-core machine.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support.pipeline_driver import expected_aggregates, kill_group, read_lines, spawn
from tests.support.pytest_plugin import make_broker

if not os.environ.get("CI"):
    pytest.importorskip("pyspark", reason="PySpark not installed: bash scripts/setup.d/30-pipeline.sh")

from pipeline.consumed import committed  # noqa: E402
from pipeline.events import GeneratorSettings, make_events  # noqa: E402
from pipeline.gaps import GapLedger, ledger_path  # noqa: E402
from pipeline.generator import generate  # noqa: E402
from pipeline.results import dead_letters_by_source, latest_per_key, read_topic  # noqa: E402
from pipeline.topics import Topics, end_offsets, ensure_topics  # noqa: E402

pytestmark = pytest.mark.timeout(600)  # three Spark start-ups on a busy 2-core machine

SETTINGS = GeneratorSettings(seed=21, malformed_every=6)
FIRST = 1000  # before the first run; its triggers read 300, so the kill leaves a backlog
BACKLOG = 1800  # written while the driver is down: ~800 offsets per partition, 3 chunks
RATE = 10.0  # steady production from before the first restart until the second one is up
CHUNK = 300
WINDOW_MS = 10_000
WATERMARK_MS = 20_000
SPARK_TIMEOUT = 300.0


class SteadyProducer(threading.Thread):
    """Writes the next events at RATE per second until stopped; `next` is the next event's index."""

    def __init__(self, bootstrap: str, topic: str, first: int):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.next = bootstrap, topic, first
        self.halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                generate(self.bootstrap, self.topic, SETTINGS, self.next, 10, rate=RATE)
                self.next += 10
        except BaseException as e:
            self.error = e

    def finish(self) -> int:
        self.halt.set()
        self.join(30)
        assert not self.is_alive() and self.error is None, f"steady producer: {self.error}"
        return self.next


@dataclass
class Scenario:
    topics: Topics
    runs: list[list[dict[str, Any]]]  # JSON lines of the three runs
    ledger_after_second_kill: GapLedger
    ledger_at_end: GapLedger
    total_events: int
    raw_ends: dict[int, int]
    group_offsets: dict[int, int]
    output: list
    dead_letters: list
    seconds: float


def _args(bootstrap: str, topics: Topics, checkpoint: Path, *extra: str, per_trigger: int = 2000) -> list[str]:
    return [
        sys.executable, "-m", "pipeline", "run", "--json", "--catch-up", "parallel", "--catch-up-chunk", str(CHUNK),
        "--bootstrap", bootstrap,
        "--raw-topic", topics.raw, "--output-topic", topics.output, "--dead-letter-topic", topics.dead_letter,
        "--partitions", str(topics.raw_partitions),
        "--checkpoint", str(checkpoint), "--trigger", "1 second", "--max-offsets-per-trigger", str(per_trigger),
        "--commit-group", f"pipeline-{topics.raw}",
        "--window", f"{WINDOW_MS // 1000} seconds", "--watermark", f"{WATERMARK_MS // 1000} seconds",
        *extra,
    ]


def _progress(lines: list[dict[str, Any]], query: str) -> list[dict[str, Any]]:
    return [e for e in lines if e.get("event") == "progress" and e["query"] == query]


def _run_until(cmd: list[str], log: Path, what: str, condition) -> list[dict[str, Any]]:
    """Start a run, wait until `condition(lines)` holds, kill it (SIGKILL), return its lines."""
    proc = spawn(cmd, log)
    deadline = time.monotonic() + SPARK_TIMEOUT
    try:
        while True:
            lines = read_lines(log)
            if condition(lines):
                return lines
            if proc.poll() is not None:
                raise AssertionError(f"the run exited with {proc.returncode} before {what}:\n{log.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} after {SPARK_TIMEOUT}s:\n{log.read_text()[-4000:]}")
            time.sleep(0.05)
    finally:
        kill_group(proc)


@pytest.fixture(scope="module")
def scenario(kafka_target: str, tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp("pipeline-catchup")
    broker = make_broker(kafka_target, workdir / "broker")
    broker.start()
    try:
        yield _run_scenario(broker.bootstrap, workdir)
    finally:
        broker.close()


def _run_scenario(bootstrap: str, workdir: Path) -> Scenario:
    t0 = time.monotonic()
    suffix = uuid.uuid4().hex[:6]
    topics = Topics(raw=f"events-{suffix}", output=f"aggregates-{suffix}", dead_letter=f"dead-{suffix}")
    ensure_topics(bootstrap, topics)
    checkpoint = workdir / "checkpoint"
    generate(bootstrap, topics.raw, SETTINGS, 0, FIRST)

    # 1. Killed once the dead-letter query committed a batch that left raw records waiting.
    run1 = _run_until(_args(bootstrap, topics, checkpoint, per_trigger=300), workdir / "run1.log",
                      "dead-letter batch with records left",
                      lambda lines: any(e["input_rows"] > 0 and e["lag"] > 0 for e in _progress(lines, "dead-letters")))

    # 2. A backlog, then steady production; the restart is killed with the gap open and fresh
    # dead letters written.
    generate(bootstrap, topics.raw, SETTINGS, FIRST, BACKLOG)
    steady = SteadyProducer(bootstrap, topics.raw, FIRST + BACKLOG)
    steady.start()
    try:
        def gap_open_and_fresh_written(lines):
            chunks = [e for e in lines if e.get("event") == "catch-up"]
            assert not any(e["done"] for e in chunks), "the gap was done before fresh dead letters were written"
            return chunks and any(e["output_rows"] > 0 for e in _progress(lines, "dead-letters"))

        run2 = _run_until(_args(bootstrap, topics, checkpoint), workdir / "run2.log",
                          "catch-up chunk and fresh dead letters", gap_open_and_fresh_written)
        ledger_after_second_kill = GapLedger.load(ledger_path(checkpoint), topics.raw)

        # 3. The second restart runs to the end; production stops once it is up.
        log3 = workdir / "run3.log"
        proc = spawn(_args(bootstrap, topics, checkpoint, "--stop-when-idle", "2"), log3)
        try:
            deadline = time.monotonic() + SPARK_TIMEOUT
            while not any(e.get("event") == "started" for e in read_lines(log3)):
                assert proc.poll() is None, f"the third run exited with {proc.returncode}:\n{log3.read_text()[-4000:]}"
                assert time.monotonic() < deadline, f"the third run did not start:\n{log3.read_text()[-4000:]}"
                time.sleep(0.1)
            total = steady.finish()
            proc.wait(SPARK_TIMEOUT)
        except BaseException:
            kill_group(proc)
            raise
        assert proc.returncode == 0, f"the third run exited with {proc.returncode}:\n{log3.read_text()[-4000:]}"
    finally:
        steady.halt.set()
    return Scenario(
        topics=topics, runs=[run1, run2, read_lines(log3)], ledger_after_second_kill=ledger_after_second_kill,
        ledger_at_end=GapLedger.load(ledger_path(checkpoint), topics.raw), total_events=total,
        raw_ends=end_offsets(bootstrap, topics.raw),
        group_offsets=committed(bootstrap, f"pipeline-{topics.raw}", topics.raw, topics.raw_partitions),
        output=read_topic(bootstrap, topics.output), dead_letters=read_topic(bootstrap, topics.dead_letter),
        seconds=round(time.monotonic() - t0, 1),
    )


def _started(lines: list[dict[str, Any]]) -> dict[str, Any]:
    started = [e for e in lines if e.get("event") == "started"]
    assert started, lines[:5]
    return started[0]["catch_up"]


def test_restarts_start_the_dead_letter_query_at_the_end_and_record_the_gap(scenario: Scenario) -> None:
    first, second, third = (_started(run) for run in scenario.runs)
    assert first["new_gap"] == {} and first["starting_offsets"] == {}, "a first start is a plain start"
    # The first restart: the gap runs from where the killed query had committed to the log end at
    # the restart (everything written before the steady producer started, at least), and the
    # dead-letter query starts there.
    assert set(second["new_gap"]) == {"0", "1", "2"}
    assert {p: end for p, (_, end) in second["new_gap"].items()} == second["starting_offsets"]
    assert sum(second["starting_offsets"].values()) >= FIRST + BACKLOG
    assert sum(end - start for start, end in second["new_gap"].values()) > BACKLOG
    # The second restart: the first range resumes from its progress, and the crash inside the gap
    # added a second range where the fresh stream had got to.
    def parse(token: str) -> tuple[int, int, int]:
        span, nxt = token.split("@")
        start, end = span.split("-")
        return int(start), int(end), int(nxt)

    ranges = {p: [parse(t) for t in ts] for p, ts in third["open_ranges"].items()}
    resumed = [p for p, rs in ranges.items() if rs[0][0] == second["new_gap"][p][0] and rs[0][2] > rs[0][0]]
    assert resumed, f"no range resumed from its progress: {third}"
    assert any(len(rs) == 2 for rs in ranges.values()), f"no second range after the crash inside the gap: {third}"


def test_the_gap_was_processed_in_chunks_and_its_ranges_removed(scenario: Scenario) -> None:
    chunks = [e for run in scenario.runs[1:] for e in run if e.get("event") == "catch-up"]
    assert chunks and chunks[-1]["done"] and chunks[-1]["records_left"] == 0
    assert all(end - start <= CHUNK for e in chunks for start, end in e["chunk"].values())
    assert not scenario.ledger_after_second_kill.done(), "the second kill should land inside the gap"
    assert scenario.ledger_at_end.done() and scenario.ledger_at_end.describe() == {}
    stopped = [e for e in scenario.runs[2] if e.get("event") == "stopped"]
    assert stopped, "the last run did not report its end"


def test_every_malformed_event_is_a_dead_letter_copies_identical(scenario: Scenario) -> None:
    events = make_events(SETTINGS, 0, scenario.total_events)
    assert sum(scenario.raw_ends.values()) == scenario.total_events
    by_source = dead_letters_by_source(scenario.dead_letters)
    malformed = Counter((e.key, e.value) for e in events if e.malformed)
    assert Counter((r.key, r.value) for r in by_source.values()) == malformed
    seen: dict[tuple, tuple] = {}
    for r in scenario.dead_letters:
        src = (r.header("dlq.source.topic"), r.header("dlq.source.partition"), r.header("dlq.source.offset"))
        assert seen.setdefault(src, (r.key, r.value, r.headers)) == (r.key, r.value, r.headers)
    copies = len(scenario.dead_letters) - len(by_source)
    print(f"\n{len(by_source)} dead letters, {copies} repeated copies (at-least-once: the kills repeat"
          f" an interrupted micro-batch or chunk); {scenario.total_events} events in {scenario.seconds}s")


def test_fresh_dead_letters_were_written_before_the_gaps_last(scenario: Scenario) -> None:
    """The dead-letter topic has one partition: its offsets are the order of the writes."""
    restart_end = {int(p): o for p, o in _started(scenario.runs[1])["starting_offsets"].items()}
    fresh, gap = [], []
    for r in scenario.dead_letters:
        source_partition, source_offset = int(r.header("dlq.source.partition")), int(r.header("dlq.source.offset"))
        (fresh if source_offset >= restart_end[source_partition] else gap).append(r.offset)
    assert fresh and gap
    assert min(fresh) < max(gap), "no fresh dead letter came before the end of the gap"


def test_aggregates_kept_order_and_count_every_event_once(scenario: Scenario) -> None:
    expected = expected_aggregates(make_events(SETTINGS, 0, scenario.total_events), WINDOW_MS, WATERMARK_MS)
    assert len(expected) >= 20
    assert {k: json.loads(v) for k, v in latest_per_key(scenario.output).items()} == expected
    values: dict[bytes | None, set] = {}
    for r in scenario.output:
        values.setdefault(r.key, set()).add(r.value)
    assert {k: v for k, v in values.items() if len(v) > 1} == {}, "a window written twice with different totals"
    late = sum(e["late_rows_dropped"] for run in scenario.runs for e in _progress(run, "aggregates"))
    assert late == 0


def test_the_consumed_group_never_passed_an_open_range(scenario: Scenario) -> None:
    held = {p: pr.committed() for p, pr in scenario.ledger_after_second_kill.partitions.items()}
    consumed = [e for e in scenario.runs[1] if e.get("event") == "consumed"]
    for e in consumed:
        for p, offset in e["offsets"][scenario.topics.raw].items():
            assert offset <= held[int(p)], (e, held)
    assert scenario.group_offsets == scenario.raw_ends
