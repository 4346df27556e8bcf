"""ApiVersions parity with Apache Kafka 4.1: for every API we serve, the range Kafka 4.1 advertises,
so that clients inferring the broker's version from ApiVersions (kafka-python does) take us for
4.1, and no version newer than any reference broker (one no client was tested against)."""

from broker.protocol import codec
from broker.apis.handlers import all_handlers

# ApiVersions v3 of Apache Kafka 4.1.0 (single KRaft node, as flotilla/testenv/brokers/apache_kafka.py runs it),
# recorded 2026-11-26 for the APIs Flotilla serves: api key -> (min, max).
KAFKA_4_1 = {
    0: (0, 13), 1: (4, 18), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
    22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 1), 28: (0, 5), 32: (1, 4), 33: (0, 2),
    35: (1, 4), 36: (0, 2), 37: (0, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 47: (0, 0), 48: (0, 1), 49: (0, 1),
    55: (0, 2), 60: (0, 2), 61: (0, 0), 65: (0, 0), 66: (0, 2), 74: (0, 1), 75: (0, 0),
}
# APIs served by slices that landed beside that recording (4.1 message schemas, validVersions):
KAFKA_4_1.update({45: (0, 1), 46: (0, 0)})  # Alter/ListPartitionReassignments
KAFKA_4_1.update({29: (1, 3), 30: (1, 3), 31: (1, 3)})  # DescribeAcls, CreateAcls, DeleteAcls (v0 removed in 4.0)
KAFKA_4_1.update({50: (0, 0), 51: (0, 0)})  # Describe/AlterUserScramCredentials
KAFKA_4_1.update({34: (1, 2)})  # AlterReplicaLogDirs (4.1.0 jar: AlterReplicaLogDirsRequest.json validVersions 1-2)
# Where we differ, and why (docs/admin-apis.md repeats it): Produce v0-v2 were removed in Kafka 4
# (KIP-896) and kio has no schema for them, yet Kafka 4.1's ApiVersions still lists 0 as Produce's minimum.
DIFFERENCES = {0: (3, 13)}


def served() -> dict[int, tuple[int, int]]:
    out = {}
    for h in all_handlers():
        lo, hi = codec.kio_versions(h.api_key)
        out[h.api_key] = (max(lo, h.min_version), min(hi, h.max_version))
    return out


def test_every_api_is_advertised_as_kafka_4_1_advertises_it():
    ours = served()
    unknown = [codec.api_name(k) for k in ours if k not in KAFKA_4_1]
    assert not unknown, f"check what Kafka 4.1 advertises first: {unknown}"
    differ = {codec.api_name(k): (v, KAFKA_4_1[k]) for k, v in ours.items()
              if v != DIFFERENCES.get(k, KAFKA_4_1[k])}
    assert not differ, f"advertised unlike Apache Kafka 4.1 (ours, Kafka's): {differ}"


def test_no_api_is_advertised_above_kafka_4_1():
    over = {codec.api_name(k): v for k, v in served().items() if v[1] > KAFKA_4_1[k][1]}
    assert not over, over
