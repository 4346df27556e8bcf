"""The broker advertises no version above what Apache Kafka 4.1 advertises: a version newer than
every reference broker cannot have been tested against any client (issue 8, item 9)."""

from broker.protocol import codec
from broker.server.handlers import all_handlers

# ApiVersions of Apache Kafka 4.1.0 (single KRaft node, as tests/support/apache_kafka.py runs it),
# recorded 2026-11-23 for the APIs Flotilla serves: api key -> highest version (48, 49: validVersions
# 0-1 in the 4.1 kafka-clients message schemas; 21: DeleteRecords, validVersions 0-2 there).
KAFKA_4_1_MAX = {
    0: 13, 1: 18, 2: 10, 3: 13, 8: 9, 9: 9, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 6, 16: 5, 18: 4,
    19: 7, 20: 6, 21: 2, 22: 5, 23: 4, 24: 5, 25: 4, 26: 5, 28: 4, 32: 4, 33: 2, 37: 3, 42: 2, 43: 2, 44: 1, 48: 1, 49: 1, 60: 2, 61: 0, 65: 0, 66: 1,
}
KAFKA_4_1_MAX[27] = 1  # WriteTxnMarkers: v1 only (v0 removed in 4.0)
KAFKA_4_1_MAX.update({17: 1, 36: 2})  # SaslHandshake 0-1, SaslAuthenticate 0-2 (4.1 message schemas)
KAFKA_4_1_MAX.update({45: 1, 46: 0})  # Alter/ListPartitionReassignments 0-1 and 0 (4.1 message schemas)
KAFKA_4_1_MAX.update({29: 3, 30: 3, 31: 3})  # DescribeAcls, CreateAcls, DeleteAcls: 1-3 (v0 removed in 4.0)
KAFKA_4_1_MAX.update({50: 0, 51: 0})  # Describe/AlterUserScramCredentials: validVersions 0 (4.1 message schemas)


def test_no_api_is_advertised_above_kafka_4_1():
    over = {}
    for h in all_handlers():
        lo, hi = codec.kio_versions(h.api_key)
        served_max = min(hi, h.max_version)
        assert h.api_key in KAFKA_4_1_MAX, f"{codec.api_name(h.api_key)}: check what Kafka 4.1 advertises first"
        if served_max > KAFKA_4_1_MAX[h.api_key]:
            over[codec.api_name(h.api_key)] = (served_max, KAFKA_4_1_MAX[h.api_key])
    assert not over, f"advertised above Apache Kafka 4.1 (ours, Kafka's): {over}"
