"""The PySpark pipeline end to end, on local[2] against real broker processes.

One scenario per cluster, run once by a module fixture and checked by the tests below:

1. the generator writes the first half of N events (some malformed) to the raw topic;
2. the streaming job (`python -m pipeline run`, a child process) starts, and as soon as it has
   written aggregates while raw records are still waiting, its process group (Python driver and
   Spark's JVM) is killed with SIGKILL;
3. the generator writes the second half; the job restarts from its checkpoint and runs until it has
   caught up and stayed idle;
4. the batch job recomputes the aggregates from the whole raw topic;
5. examples/pipeline-recorddeletion.yaml (consumedBy the pipeline's commit group) purges the raw
   topic: on the fleet as a RecordDeletion the operator (kopf, in-process) runs, on the single
   broker (no Kubernetes there) through the same run the operator's daemon calls.

The stream's output, as a reader sees it (latest row per key), must equal the batch recomputation
exactly, and both must equal what the generated events say in plain Python. The dead-letter topic
must hold exactly the malformed events.

The cluster is a parameter (`CLUSTERS`), one per target: `make test` runs the fleet of three
Flotilla brokers on the test kube-apiserver (RF=3, the purge through the operator); the
Kafka-reference run (`make interop-apache`, `--kafka-target=apache`) runs the same scenario on one
Apache Kafka broker (the purge through the run the operator's daemon calls). A single Flotilla
broker (`single-broker` with the Flotilla target) is what `make pipeline` runs against; it was a
third Spark scenario of `make test` that checked nothing the fleet does not.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import pytest

from flotilla.testenv.brokers.broker_process import REPO_ROOT, ServerProcess
from tests.support.pipeline_driver import expected_aggregates as driver_expected_aggregates
from tests.support.pipeline_driver import kill_group, read_lines, spawn
from tests.support.pytest_plugin import make_broker

if not os.environ.get("CI"):
    pytest.importorskip("pyspark", reason="PySpark not installed: bash scripts/setup.d/30-pipeline.sh")

from pipeline.consumed import committed  # noqa: E402
from pipeline.events import GeneratorSettings, make_events  # noqa: E402
from pipeline.generator import generate  # noqa: E402
from pipeline.results import dead_letters_by_source, latest_per_key, read_topic, reason  # noqa: E402
from pipeline.topics import Topics, ensure_topics  # noqa: E402

pytestmark = pytest.mark.timeout(900)  # three Spark start-ups on a busy 2-core machine

N_EVENTS = 2000  # 1000 before the kill: the first window closes after ~600, so batches remain
SETTINGS = GeneratorSettings(seed=7, malformed_every=12)
WINDOW_MS = 10_000
WATERMARK_MS = 20_000
SPARK_TIMEOUT = 420.0


@dataclass
class Cluster:
    """What the pipeline needs of a cluster: where to connect, how to replicate, its processes."""

    bootstrap: str
    replication_factor: int
    servers: list[ServerProcess] = field(default_factory=list)
    cleanups: list[Callable[[], None]] = field(default_factory=list)  # after the servers stop
    #: How the example RecordDeletion runs here: (raw topic, group) -> what it did.
    purge: Callable[[str, str], "Purge"] | None = None

    def __post_init__(self) -> None:
        if self.purge is None:
            self.purge = lambda raw, group: purge_directly(self.bootstrap, raw, group)

    def close(self) -> None:
        for s in self.servers:
            s.close()
        for c in self.cleanups:
            c()


def single_broker(request: pytest.FixtureRequest, target: str, workdir: Path) -> Cluster:
    broker = make_broker(target, workdir)
    broker.start()
    return Cluster(broker.bootstrap, 1, [broker])


def fleet_of_three(request: pytest.FixtureRequest, target: str, workdir: Path) -> Cluster:
    """Three Flotilla brokers sharing one KafkaCluster's metadata in the test kube-apiserver
    (flotilla/testenv/brokers/cluster.py). Topics use replication factor 3: every partition is replicated on
    every broker, so the pipeline's writes (acks=all) and reads go through leaders with followers."""
    if target != "flotilla":
        pytest.skip("the fleet is Flotilla's (Apache Kafka runs as the single broker)")
    from flotilla.testenv.brokers.cluster import BrokerCluster

    kube_env = request.getfixturevalue("kube_env")
    namespace = f"pipeline-fleet-{uuid.uuid4().hex[:8]}"  # kube_namespace is per test; this is per module
    kube_env.kubectl("create", "namespace", namespace)
    fleet = BrokerCluster(workdir, kube_env, namespace, size=3)
    bootstrap = ",".join(b.bootstrap for b in fleet.brokers)
    cluster = Cluster(bootstrap, 3, list(fleet.brokers), cleanups=[
        lambda: kube_env.kubectl("delete", "namespace", namespace, "--wait=false", "--ignore-not-found",
                                 check=False, timeout=30)],
        purge=lambda raw, group: purge_through_operator(kube_env, namespace, bootstrap, raw, group))
    try:
        fleet.start()
    except BaseException:
        cluster.close()
        raise
    return cluster


# name -> starter(request, kafka_target, workdir)
CLUSTERS: dict[str, Callable[[pytest.FixtureRequest, str, Path], Cluster]] = {
    "single-broker": single_broker, "fleet-3": fleet_of_three}


@dataclass
class Scenario:
    cluster: Cluster
    topics: Topics
    first_run: list[dict[str, Any]]  # JSON lines the killed run printed
    second_run: list[dict[str, Any]]  # JSON lines of the run after the restart
    killed_at: dict[str, Any]  # the progress report after which the driver was killed
    killed_batch: int  # the aggregates batch that was planned (offsets logged) but not committed
    batch: dict[str, str]
    group_offsets: dict[int, int]  # what the pipeline committed to its consumer group at the end
    raw_ends: dict[int, int]  # the raw topic's end offsets
    purge: "Purge"  # what examples/pipeline-recorddeletion.yaml's policy did
    raw_starts: dict[int, int]  # the raw topic's log start offsets after it
    output: list  # every record in the output topic
    dead_letters: list  # every record in the dead-letter topic
    seconds: dict[str, float]


def _run_args(cluster: Cluster, topics: Topics, checkpoint: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "pipeline", "run", "--json",
        "--bootstrap", cluster.bootstrap,
        "--raw-topic", topics.raw, "--output-topic", topics.output, "--dead-letter-topic", topics.dead_letter,
        "--partitions", str(topics.raw_partitions), "--replication-factor", str(topics.replication_factor),
        "--checkpoint", str(checkpoint), "--trigger", "1 second", "--max-offsets-per-trigger", "150",
        "--commit-group", f"pipeline-{topics.raw}",
        "--window", f"{WINDOW_MS // 1000} seconds", "--watermark", f"{WATERMARK_MS // 1000} seconds",
        *extra,
    ]


def _batch_ids(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.glob("*") if p.name.isdigit()) if directory.exists() else []


def _wait_mid_batch(checkpoint: Path, timeout: float = 20.0) -> int | None:
    """Wait until the query has logged the offsets of a batch it has not committed: it is mid-batch."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        offsets, commits = _batch_ids(checkpoint / "offsets"), _batch_ids(checkpoint / "commits")
        if offsets and (not commits or offsets[-1] > commits[-1]):
            return offsets[-1]
        time.sleep(0.01)
    return None


def _first_output_mid_run(lines: list[dict[str, Any]]) -> dict[str, Any] | None:
    for e in lines:
        if e.get("event") == "progress" and e["query"] == "aggregates" and e["output_rows"] > 0 and e["lag"] > 0:
            return e
    return None


CLUSTER_MARKS = {"fleet-3": [pytest.mark.kube]}
#: The scenario each target runs (see the module docstring).
TARGET_CLUSTERS = {"flotilla": ["fleet-3"], "apache": ["single-broker"]}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "scenario" in metafunc.fixturenames:
        names = TARGET_CLUSTERS[metafunc.config.getoption("--kafka-target")]
        metafunc.parametrize("scenario", [pytest.param(n, marks=CLUSTER_MARKS.get(n, [])) for n in names],
                             indirect=True, scope="module")


@pytest.fixture(scope="module")
def scenario(request: pytest.FixtureRequest, kafka_target: str, tmp_path_factory: pytest.TempPathFactory):
    workdir = tmp_path_factory.mktemp(f"pipeline-{request.param}")
    cluster = CLUSTERS[request.param](request, kafka_target, workdir / "cluster")
    try:
        yield _run_scenario(cluster, workdir)
    finally:
        cluster.close()


def _run_scenario(cluster: Cluster, workdir: Path) -> Scenario:
    suffix = uuid.uuid4().hex[:6]
    topics = Topics(raw=f"events-{suffix}", output=f"aggregates-{suffix}", dead_letter=f"dead-{suffix}",
                    raw_partitions=3, replication_factor=cluster.replication_factor)
    ensure_topics(cluster.bootstrap, topics)
    checkpoint = workdir / "checkpoint"
    half = N_EVENTS // 2
    seconds: dict[str, float] = {}
    t0 = time.monotonic()

    generate(cluster.bootstrap, topics.raw, SETTINGS, 0, half)

    # First run: kill the driver as soon as it has written aggregates with raw records still waiting.
    log1 = workdir / "run1.log"
    proc = spawn(_run_args(cluster, topics, checkpoint), log1)
    killed_at = None
    deadline = time.monotonic() + SPARK_TIMEOUT
    try:
        while killed_at is None:
            if proc.poll() is not None:
                raise AssertionError(f"streaming job exited with {proc.returncode}:\n{log1.read_text()[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no aggregates written mid-run after {SPARK_TIMEOUT}s:\n{log1.read_text()[-4000:]}")
            killed_at = _first_output_mid_run(read_lines(log1))
            time.sleep(0.1)
        # The kill lands inside a micro-batch: planned (offsets/N written), not committed.
        killed_batch = _wait_mid_batch(checkpoint / "aggregates")
    finally:
        kill_group(proc)
    assert killed_batch is not None, "the aggregates query never started another batch after its first output"
    assert _batch_ids(checkpoint / "aggregates" / "offsets")[-1] > _batch_ids(checkpoint / "aggregates" / "commits")[-1]
    seconds["first_run"] = time.monotonic() - t0

    generate(cluster.bootstrap, topics.raw, SETTINGS, half, N_EVENTS - half)

    # Second run: from the checkpoint, until both queries have caught up and stayed idle.
    log2 = workdir / "run2.log"
    proc = spawn(_run_args(cluster, topics, checkpoint, "--stop-when-idle", "4"), log2)
    try:
        proc.wait(SPARK_TIMEOUT)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        raise AssertionError(f"restarted job did not catch up in {SPARK_TIMEOUT}s:\n{log2.read_text()[-4000:]}")
    assert proc.returncode == 0, f"restarted job exited with {proc.returncode}:\n{log2.read_text()[-4000:]}"
    seconds["second_run"] = time.monotonic() - t0 - seconds["first_run"]

    t1 = time.monotonic()
    out = workdir / "batch.json"
    cmd = [sys.executable, "-m", "pipeline", "batch", "--bootstrap", cluster.bootstrap, "--raw-topic", topics.raw,
           "--window", f"{WINDOW_MS // 1000} seconds", "--watermark", f"{WATERMARK_MS // 1000} seconds",
           "--out", str(out)]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=SPARK_TIMEOUT)
    assert done.returncode == 0, f"batch job exited with {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    seconds["batch"] = time.monotonic() - t1

    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
    try:
        raw_ends = {p: c.get_watermark_offsets(TopicPartition(topics.raw, p), timeout=10)[1]
                    for p in range(topics.raw_partitions)}
    finally:
        c.close()
    group_offsets = committed(cluster.bootstrap, f"pipeline-{topics.raw}", topics.raw, topics.raw_partitions)
    # Last (the batch job read the whole raw topic): the example RecordDeletion on this run's topic
    # and group.
    purge = cluster.purge(topics.raw, f"pipeline-{topics.raw}")
    c = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "watermarks"})
    try:
        raw_starts = {p: c.get_watermark_offsets(TopicPartition(topics.raw, p), timeout=10)[0]
                      for p in range(topics.raw_partitions)}
    finally:
        c.close()
    return Scenario(
        group_offsets=group_offsets, purge=purge, raw_starts=raw_starts,
        raw_ends=raw_ends,
        cluster=cluster, topics=topics, first_run=read_lines(log1), second_run=read_lines(log2), killed_at=killed_at, killed_batch=killed_batch,
        batch=json.loads(out.read_text()), output=read_topic(cluster.bootstrap, topics.output),
        dead_letters=read_topic(cluster.bootstrap, topics.dead_letter), seconds=seconds,
    )


@dataclass
class Purge:
    """What the example RecordDeletion did: records deleted, or why it failed."""

    deleted: int
    error: str | None
    via: str  # "operator" (a RecordDeletion resource) or "record_admin" (its run, called directly)


def example_deletion(raw_topic: str, group: str) -> dict[str, Any]:
    """examples/pipeline-recorddeletion.yaml for this run's raw topic and commit group."""
    import yaml

    doc = yaml.safe_load((REPO_ROOT / "examples" / "pipeline-recorddeletion.yaml").read_text())
    doc["spec"] = dict(doc["spec"], topic=raw_topic, before={"consumedBy": [group]})
    return doc


def purge_directly(bootstrap: str, raw_topic: str, group: str) -> Purge:
    """The example's spec through record_admin.run, what the operator's daemon calls (a single
    broker has no Kubernetes to hold the resource)."""
    from flotilla_operator.clients import record_admin
    from flotilla_operator.api.record_deletion import RecordDeletionSpec

    result = record_admin.run(bootstrap, RecordDeletionSpec.model_validate(example_deletion(raw_topic, group)["spec"]))
    return Purge(result.deleted, result.error and f"{result.error.reason}: {result.error.message}", "record_admin")


def purge_through_operator(kube_env: Any, namespace: str, bootstrap: str, raw_topic: str, group: str) -> Purge:
    """The example as a RecordDeletion in the fleet's namespace, run by the operator (kopf,
    in-process, watching that namespace; it reaches the brokers at `bootstrap`). Returns once its
    first run is in the status; the resource is deleted again (its schedule stops)."""
    from kopf.testing import KopfRunner

    from tests.support.outside_cluster import stand_in_cluster
    from flotilla.testenv.waiting import wait_for

    doc = example_deletion(raw_topic, group)
    doc["metadata"]["namespace"] = namespace
    name = doc["metadata"]["name"]

    def first_run() -> dict[str, Any] | None:
        proc = kube_env.kubectl("get", "recorddeletion", name, "-n", namespace, "-o", "json")
        obj = json.loads(proc.stdout)
        ready = next((c for c in (obj.get("status") or {}).get("conditions") or () if c["type"] == "Ready"), {})
        return obj if ready.get("observedGeneration") == obj["metadata"]["generation"] else None

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("KUBECONFIG", str(kube_env.kubeconfig))
        mp.setenv("FLOTILLA_OPERATOR_METRICS_ADDRESS", "off")
        mp.setenv("FLOTILLA_OPERATOR_LIVENESS_ADDRESS", "off")
        mp.setenv("FLOTILLA_OPERATOR_NAMESPACES", namespace)  # its resync too: nothing else is its business
        with KopfRunner(["run", f"--namespace={namespace}", "--standalone", "-m", "flotilla_operator.handlers"],
                        timeout=60) as runner:
            # The example's cluster stands for the fleet's brokers (processes on this host).
            kube_env.kubectl("apply", "-f", "-", input=json.dumps(stand_in_cluster(
                doc["spec"]["clusterRef"]["name"], namespace, bootstrap)))
            kube_env.kubectl("apply", "-f", "-", input=json.dumps(doc))
            try:
                obj = wait_for(f"RecordDeletion {name}'s first run", first_run, timeout=90)
            finally:
                kube_env.kubectl("delete", "recorddeletion", name, "-n", namespace, "--wait=true",
                                 "--timeout=60s", check=False)
    assert runner.exception is None, runner.output[-4000:]
    ready = next(c for c in obj["status"]["conditions"] if c["type"] == "Ready")
    return Purge(int(obj["status"].get("recordsDeleted") or 0),
                 None if ready["reason"] == "Deleted" else f"{ready['reason']}: {ready['message']}", "operator")


def expected_aggregates() -> dict[str, dict[str, Any]]:
    """The closed windows' totals, computed from the generated events in plain Python."""
    return driver_expected_aggregates(make_events(SETTINGS, 0, N_EVENTS), WINDOW_MS, WATERMARK_MS)


def test_driver_was_killed_mid_run_and_resumed_from_its_checkpoint(scenario: Scenario) -> None:
    first_agg = [e for e in scenario.first_run if e.get("event") == "progress" and e["query"] == "aggregates"]
    assert scenario.killed_at["lag"] > 0 and scenario.killed_at["output_rows"] > 0
    assert not any(e.get("event") == "stopped" for e in scenario.first_run), "the first run stopped by itself"
    started = [e for e in scenario.second_run if e.get("event") == "started"]
    assert started, scenario.second_run[:5]
    stopped = [e for e in scenario.second_run if e.get("event") == "stopped"]
    assert stopped, "the restarted run did not report its end"
    # The restarted queries continued the batch numbering of the checkpoint instead of starting over;
    # the aggregates query began by re-running the batch the kill interrupted.
    for query, totals in stopped[0]["totals"].items():
        assert totals["first_batch"] is not None and totals["first_batch"] > 0, (query, totals)
    assert stopped[0]["totals"]["aggregates"]["first_batch"] == scenario.killed_batch
    # Every progress report carries lag and rows per micro-batch; the last says the job caught up.
    second_agg = [e for e in scenario.second_run if e.get("event") == "progress" and e["query"] == "aggregates"]
    assert first_agg and second_agg
    assert all(isinstance(e["lag"], int) and isinstance(e["input_rows"], int) for e in first_agg + second_agg)
    assert second_agg[-1]["lag"] == 0
    assert sum(e["late_rows_dropped"] for e in first_agg + second_agg) == 0


def test_consumed_offsets_are_committed_to_the_pipeline_group(scenario: Scenario) -> None:
    """What both queries finished with is in the group, for a RecordDeletion resource to purge."""
    assert sum(scenario.raw_ends.values()) == N_EVENTS
    assert scenario.group_offsets == scenario.raw_ends
    consumed = [e for e in scenario.first_run + scenario.second_run if e.get("event") == "consumed"]
    assert len(consumed) >= 2
    # Never ahead of a query: the killed run committed at most what it had finished before the kill.
    first = [e for e in scenario.first_run if e.get("event") == "consumed"]
    assert first and sum(first[-1]["offsets"][scenario.topics.raw].values()) < N_EVENTS // 2


def test_raw_topic_is_purged_up_to_what_the_pipeline_consumed(scenario: Scenario) -> None:
    """The example RecordDeletion (consumedBy the commit group) deletes exactly what both queries
    finished with: the raw topic's earliest offsets advance to the group's commits."""
    assert scenario.purge.error is None, scenario.purge
    assert scenario.raw_starts == scenario.group_offsets and sum(scenario.raw_starts.values()) > 0
    assert scenario.purge.deleted == sum(scenario.group_offsets.values())


def test_stream_output_equals_batch_recomputation(scenario: Scenario) -> None:
    latest = latest_per_key(scenario.output)
    assert scenario.batch, "the batch job found no closed window"
    assert latest == scenario.batch
    # A row written twice (the micro-batch re-run after the kill) is an identical copy, never a
    # different value for the same window: readers that keep the latest row lose and repeat nothing.
    copies: dict[str, set[bytes | None]] = {}
    for r in scenario.output:
        copies.setdefault((r.key or b"").decode(), set()).add(r.value)
    assert {k: v for k, v in copies.items() if len(v) > 1} == {}
    print(f"\noutput rows {len(scenario.output)} for {len(latest)} windows"
          f" ({len(scenario.output) - len(latest)} repeated copies); timings {scenario.seconds}")


def test_batch_recomputation_matches_the_generated_events(scenario: Scenario) -> None:
    expected = expected_aggregates()
    assert {k: json.loads(v) for k, v in scenario.batch.items()} == expected
    assert len(expected) >= 20  # several windows times four categories


def test_dead_letter_topic_holds_exactly_the_malformed_events(scenario: Scenario) -> None:
    events = make_events(SETTINGS, 0, N_EVENTS)
    malformed = Counter((e.key, e.value) for e in events if e.malformed)
    assert len(set(e.malformed for e in events if e.malformed)) >= 6, "the scenario should cover most malformed kinds"
    by_source = dead_letters_by_source(scenario.dead_letters)
    assert Counter((r.key, r.value) for r in by_source.values()) == malformed
    assert all(reason(r) for r in by_source.values())
    assert {src[0] for src in by_source} == {scenario.topics.raw}
    # Copies from a re-run micro-batch are byte-identical to the first.
    seen: dict[tuple, tuple] = {}
    for r in scenario.dead_letters:
        src = (r.header("dlq.source.topic"), r.header("dlq.source.partition"), r.header("dlq.source.offset"))
        assert seen.setdefault(src, (r.key, r.value, r.headers)) == (r.key, r.value, r.headers)


def test_topics_are_replicated_as_the_cluster_says(scenario: Scenario) -> None:
    """The pipeline's topics have the cluster's replication factor (3 on the fleet: each partition
    on every broker), all replicas in sync once the runs are over."""
    from confluent_kafka.admin import AdminClient

    topics = scenario.topics
    meta = AdminClient({"bootstrap.servers": scenario.cluster.bootstrap}).list_topics(timeout=10)
    for name in (topics.raw, topics.output, topics.dead_letter):
        partitions = meta.topics[name].partitions
        assert partitions, name
        shapes = {p: (len(set(pm.replicas)), sorted(pm.isrs) == sorted(pm.replicas)) for p, pm in partitions.items()}
        assert set(shapes.values()) == {(topics.replication_factor, True)}, (name, shapes)
