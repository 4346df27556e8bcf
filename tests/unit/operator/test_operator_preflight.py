from flotilla_operator.builders.configmap import server_properties
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec
from flotilla_operator.preflight import check_server_properties


def test_operator_rendering_passes_the_broker_parser(owner, spec):
    assert check_server_properties(server_properties(owner, spec)) is None


def test_unknown_key_and_bad_value(owner):
    unknown = KafkaClusterSpec.model_validate({"config": {"log.retention.minutes": "5"}})
    assert "log.retention.minutes" in check_server_properties(server_properties(owner, unknown))
    bad = KafkaClusterSpec.model_validate({"config": {"num.partitions": "zero"}})
    assert "num.partitions" in check_server_properties(server_properties(owner, bad))
