"""`flotilla random-uuid` prints a cluster.id in Kafka's form (a UUID, base64url without padding),
which meta.properties accepts, and a new one each time."""

import base64
import subprocess
import sys

from broker.metadata.meta_properties import ensure_meta_properties


def random_uuid() -> str:
    out = subprocess.run([sys.executable, "-m", "flotilla.cli", "random-uuid"], capture_output=True, text=True,
                         check=True, timeout=60)
    return out.stdout.strip()


def test_prints_a_kafka_style_uuid_that_brokers_keep(tmp_path):
    first, second = random_uuid(), random_uuid()
    assert first != second
    assert len(first) == 22 and len(base64.urlsafe_b64decode(first + "==")) == 16
    assert ensure_meta_properties([tmp_path], 1, first) == first
    assert f"cluster.id={first}" in (tmp_path / "meta.properties").read_text()
