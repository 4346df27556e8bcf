"""The API models: defaults, and validation errors that name the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from flotilla_operator.api.client_quota import ClientQuotaSpec, CLIENT_QUOTA
from flotilla_operator.api.common import describe_errors, parse_spec
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec, KAFKA_CLUSTER, OPERATOR_OWNED_CONFIG_KEYS
from flotilla_operator.api.record_deletion import RecordDeletionSpec, RECORD_DELETION


def errors(model, data) -> str:
    with pytest.raises(ValidationError) as info:
        model.model_validate(data)
    return describe_errors(info.value)


def test_kafkacluster_defaults():
    spec = KafkaClusterSpec.model_validate({})
    assert spec.replicas == 3
    assert spec.storage.type == "persistent-claim" and spec.storage.size == "10Gi"
    assert [(l.name, l.port, l.protocol) for l in spec.listeners] == [("PLAINTEXT", 9092, "PLAINTEXT")]
    assert spec.config == {}
    assert spec.template.termination_grace_period_seconds == 120


def test_camel_case_on_the_wire():
    spec = KafkaClusterSpec.model_validate(
        {"storage": {"storageClassName": "fast", "deleteClaim": True}, "imagePullPolicy": "Always"}
    )
    assert spec.storage.storage_class_name == "fast" and spec.storage.delete_claim
    dumped = spec.to_k8s()
    assert dumped["storage"]["storageClassName"] == "fast"
    assert dumped["imagePullPolicy"] == "Always"


@pytest.mark.parametrize("key", OPERATOR_OWNED_CONFIG_KEYS)
def test_owned_config_keys_rejected_by_name(key):
    msg = errors(KafkaClusterSpec, {"config": {key: "x"}})
    assert msg.startswith("spec.config: ")
    assert f"must not set {key}: a key the operator owns" in msg


def test_config_key_spelling():
    msg = errors(KafkaClusterSpec, {"config": {"Log.Retention.Ms": "1"}})
    assert "spec.config" in msg and "Log.Retention.Ms" in msg


def test_config_accepts_ints_and_strings():
    spec = KafkaClusterSpec.model_validate({"config": {"num.partitions": 6, "log.retention.ms": "1000"}})
    assert spec.config == {"num.partitions": 6, "log.retention.ms": "1000"}


def test_replicas_bounds_name_the_field():
    assert errors(KafkaClusterSpec, {"replicas": 0}).startswith("spec.replicas: ")
    assert "spec.replicas" in errors(KafkaClusterSpec, {"replicas": 65})


def test_unknown_field_rejected():
    assert "spec.replica" in errors(KafkaClusterSpec, {"replica": 3})


def test_storage_size_must_be_a_quantity():
    assert "spec.storage.size" in errors(KafkaClusterSpec, {"storage": {"size": "ten gigs"}})


def test_resources_quantities():
    assert "spec.resources.requests" in errors(KafkaClusterSpec, {"resources": {"requests": {"cpu": "lots"}}})
    ok = KafkaClusterSpec.model_validate({"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": 2}}})
    assert ok.resources.limits == {"cpu": 2}


def test_listeners_unique_and_not_metrics_port():
    dup = [{"name": "A", "port": 9092}, {"name": "A", "port": 9093}]
    assert "spec.listeners" in errors(KafkaClusterSpec, {"listeners": dup})
    same_port = [{"name": "A", "port": 9092}, {"name": "B", "port": 9092}]
    assert "ports must be unique" in errors(KafkaClusterSpec, {"listeners": same_port})
    assert "9404" in errors(KafkaClusterSpec, {"listeners": [{"name": "A", "port": 9404}]})
    assert "spec.listeners[0].name" in errors(KafkaClusterSpec, {"listeners": [{"name": "lower", "port": 9092}]})
    assert "spec.listeners" in errors(KafkaClusterSpec, {"listeners": []})


def test_clientquota_entity_combinations():
    """Kafka's entity combinations: a user, a client-id or one of each, each named or the default;
    never a name and the default of one type, never nothing."""
    base = {"clusterRef": {"name": "demo"}, "producerByteRate": 1024}
    assert "name a user (user or defaultUser: true), a client-id" in errors(ClientQuotaSpec, {**base, "entity": {}})
    assert "name a user" in errors(ClientQuotaSpec, {**base, "entity": {"default": False, "defaultUser": False}})
    assert "at most one of clientId or default" in errors(
        ClientQuotaSpec, {**base, "entity": {"clientId": "a", "default": True}})
    assert "at most one of user or defaultUser" in errors(
        ClientQuotaSpec, {**base, "entity": {"user": "alice", "defaultUser": True}})
    assert "spec.entity.user" in errors(ClientQuotaSpec, {**base, "entity": {"user": ""}})
    for entity in ({"clientId": "app"}, {"default": True}, {"clientId": ""},  # "": clients without an id
                   {"user": "alice"}, {"defaultUser": True}, {"user": "alice", "clientId": "app"},
                   {"user": "alice", "default": True}, {"defaultUser": True, "clientId": "app"},
                   {"defaultUser": True, "default": True}):
        ClientQuotaSpec.model_validate({**base, "entity": entity})


def test_clientquota_needs_a_rate():
    msg = errors(ClientQuotaSpec, {"clusterRef": {"name": "demo"}, "entity": {"default": True}})
    assert "producerByteRate, consumerByteRate or requestPercentage" in msg
    assert "spec.consumerByteRate" in errors(
        ClientQuotaSpec, {"clusterRef": {"name": "demo"}, "entity": {"default": True}, "consumerByteRate": 0}
    )
    assert "spec.requestPercentage" in errors(
        ClientQuotaSpec, {"clusterRef": {"name": "demo"}, "entity": {"user": "a"}, "requestPercentage": 0}
    )
    spec = ClientQuotaSpec.model_validate({"clusterRef": {"name": "demo"}, "entity": {"user": "a"},
                                           "requestPercentage": 12.5})
    assert spec.request_percentage == 12.5


def test_clientquota_crd_schema_matches_the_model():
    """The rendered CRD carries the same rules: CEL for the entity and the rates, an exclusive
    minimum (OpenAPI v3.0's form) for requestPercentage."""
    from flotilla_operator.crd_render import crd
    from flotilla_operator.api.client_quota import CLIENT_QUOTA

    spec = crd(CLIENT_QUOTA)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["requestPercentage"] | {"description": ""} == {
        "type": "number", "minimum": 0, "exclusiveMinimum": True, "description": ""}
    entity = spec["properties"]["entity"]
    assert set(entity["properties"]) == {"user", "defaultUser", "clientId", "default"}
    messages = [v["message"] for v in entity["x-kubernetes-validations"]]
    assert any("at most one of user or defaultUser" in m for m in messages)
    assert any("requestPercentage" in v["message"] for v in spec["x-kubernetes-validations"])


def test_recorddeletion_before_exactly_one():
    base = {"clusterRef": {"name": "demo"}, "topic": "events"}
    assert "spec.before" in errors(RecordDeletionSpec, {**base, "before": {}})
    assert "spec.before" in errors(RecordDeletionSpec, {**base, "before": {"offset": 5, "consumedBy": ["g"]}})
    ok = RecordDeletionSpec.model_validate({**base, "before": {"consumedBy": ["etl", "audit"]}, "interval": "10m"})
    assert ok.before.consumed_by == ["etl", "audit"] and ok.interval == "10m"
    RecordDeletionSpec.model_validate({**base, "before": {"timestamp": "2026-01-01T00:00:00Z"}, "partitions": [0, 2]})


def test_recorddeletion_field_checks():
    base = {"clusterRef": {"name": "demo"}, "before": {"offset": 1}}
    assert "spec.topic" in errors(RecordDeletionSpec, {**base, "topic": "no spaces"})
    assert "spec.interval" in errors(RecordDeletionSpec, {**base, "topic": "t", "interval": "soon"})
    assert "spec.partitions" in errors(RecordDeletionSpec, {**base, "topic": "t", "partitions": [-1]})
    assert "spec.before.offset" in errors(RecordDeletionSpec, {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"offset": -1}})


def test_parse_spec_raises_valueerror_naming_field():
    with pytest.raises(ValueError, match=r"spec\.replicas"):
        parse_spec(KAFKA_CLUSTER, {"replicas": -1})
    assert parse_spec(CLIENT_QUOTA, {"clusterRef": {"name": "d"}, "entity": {"default": True}, "producerByteRate": 1})
    with pytest.raises(ValueError, match=r"spec\.clusterRef"):
        parse_spec(RECORD_DELETION, {"topic": "t", "before": {"offset": 1}})


def test_example_kafkacluster_is_valid():
    from pathlib import Path

    import yaml

    from flotilla_operator.builders import Owner, build_all
    from flotilla_operator.preflight import check_server_properties

    doc = yaml.safe_load((Path(__file__).resolve().parents[3] / "examples" / "kafkacluster.yaml").read_text())
    assert doc["apiVersion"] == "flotilla.io/v1alpha1" and doc["kind"] == "KafkaCluster"
    spec = KafkaClusterSpec.model_validate(doc["spec"])
    desired = build_all(Owner("demo", "default", "u"), spec, image="flotilla:x")
    assert check_server_properties(desired.server_properties) is None


def test_recorddeletion_keep_is_records_or_duration():
    base = {"clusterRef": {"name": "demo"}, "topic": "t", "before": {"consumedBy": ["g"]}}
    assert "spec.keep" in errors(RecordDeletionSpec, {**base, "keep": {}})
    assert "spec.keep" in errors(RecordDeletionSpec, {**base, "keep": {"records": 5, "duration": "1h"}})
    assert "spec.keep.records" in errors(RecordDeletionSpec, {**base, "keep": {"records": -1}})
    assert "spec.keep.duration" in errors(RecordDeletionSpec, {**base, "keep": {"duration": "a while"}})
    assert RecordDeletionSpec.model_validate({**base, "keep": {"duration": "1h"}}).keep.duration == "1h"


def test_recorddeletion_example_is_valid():
    from pathlib import Path

    import yaml

    docs = list(yaml.safe_load_all((Path(__file__).resolve().parents[3] / "examples" / "recorddeletion.yaml").read_text()))
    assert [d["kind"] for d in docs] == ["RecordDeletion", "RecordDeletion"]
    specs = [RecordDeletionSpec.model_validate(d["spec"]) for d in docs]
    assert specs[0].before.consumed_by == ["spark-stage-2"] and specs[0].keep.records == 1000
    assert specs[1].before.timestamp is not None and specs[1].interval is None


def test_pipeline_recorddeletion_example_is_valid():
    from pathlib import Path

    import yaml

    doc = yaml.safe_load((Path(__file__).resolve().parents[3] / "examples" / "pipeline-recorddeletion.yaml").read_text())
    spec = RecordDeletionSpec.model_validate(doc["spec"])
    assert spec.before.consumed_by == ["flotilla-pipeline"] and spec.topic == "events" and spec.interval == "1m"


def test_clientquota_examples_are_valid():
    from pathlib import Path

    import yaml

    from flotilla_operator.builders import client_quota as cq

    examples = Path(__file__).resolve().parents[3] / "examples"
    plain = yaml.safe_load((examples / "clientquota.yaml").read_text())["spec"]
    user = yaml.safe_load((examples / "clientquota-user.yaml").read_text())["spec"]
    ClientQuotaSpec.model_validate(plain)
    assert ClientQuotaSpec.model_validate(user).request_percentage == 25
    assert cq.entity_of(plain) == {"client-id": "batch-loader"} and cq.entity_of(user) == {"user": "alice"}
