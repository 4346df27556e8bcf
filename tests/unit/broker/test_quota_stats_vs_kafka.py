"""Flotilla's quota rate arithmetic against Kafka's own Rate class (kafka-clients 4.1, run by the
JVM): the same records at the same times give the same rate and window, step by step, through
bursts, idle gaps longer than the window set (samples purged) and the sample ring wrapping.
Kafka's jars are fetched with Maven on first use and cached (as for --kafka-target=apache); skipped
only without Java or Maven, which CI has (scripts/setup.d/10-clients.sh)."""

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from broker.quotas.quota_stats import Rate, RateConfig, SimpleRate, java_round, throttle_time_ms

REPO = Path(__file__).resolve().parents[3]
CHECK = REPO / "tests" / "java" / "kafka-rate" / "RateCheck.java"


def kafka_clients_jar() -> Path | None:
    """Kafka's client jar (fetched once, cached), or None without Java or Maven."""
    from flotilla.testenv.brokers.apache_kafka import ensure_kafka_libs

    if not (shutil.which("java") and shutil.which("mvn")):
        return None
    (jar,) = sorted(ensure_kafka_libs().glob("kafka-clients-*.jar"))
    return jar


def scenario(seed: int, samples: int, window_ms: int) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    t, out = 1_000_000, []
    for _ in range(400):
        r = rng.random()
        t += rng.randint(0, 20) if r < 0.6 else rng.randint(100, 1500) if r < 0.95 else rng.randint(5_000, 15_000)
        out.append((t, float(rng.choice([1, 100, 16384, 1048576, rng.randint(1, 200_000)]))))
    return out


@pytest.mark.parametrize("kind", ["rate", "simple"])
@pytest.mark.parametrize("samples, window_ms, seed", [(11, 1000, 1), (11, 1000, 2), (3, 500, 3), (30, 2000, 4)])
def test_rate_and_window_equal_kafkas(samples, window_ms, seed, kind):
    """Rate (client quotas) and SimpleRate (replication throttles) each against Kafka's class."""
    java, jar = shutil.which("java"), kafka_clients_jar()
    if java is None or jar is None:
        pytest.skip("needs java and mvn (scripts/setup.d/10-clients.sh installs them)")
    steps = scenario(seed, samples, window_ms)
    stdin = "".join(f"{t} {v} {samples} {window_ms}\n" for t, v in steps)
    out = subprocess.run([java, "-cp", str(jar), str(CHECK), kind], input=stdin, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    kafka = [tuple(map(float, line.split())) for line in out.stdout.split("\n") if line.strip()]
    assert len(kafka) == len(steps)
    ours = (SimpleRate if kind == "simple" else Rate)(RateConfig(samples=samples, window_ms=window_ms))
    for i, ((t, v), (k_rate, k_window)) in enumerate(zip(steps, kafka)):
        ours.record(v, t)
        assert ours.window_size_ms(t) == int(k_window), f"step {i} at {t}"
        assert ours.measure(t) == pytest.approx(k_rate, rel=1e-12), f"step {i} at {t}"
        bound = 50_000.0
        if k_rate > bound:  # QuotaUtils.throttleTime with Kafka's numbers and ours agree
            expected = java_round((k_rate - bound) / bound * k_window)
            assert throttle_time_ms(ours.measure(t), bound, ours.window_size_ms(t)) == expected
