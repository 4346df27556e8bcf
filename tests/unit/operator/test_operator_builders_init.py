"""build_all: every child, in order, consistently named and owned."""

from flotilla_operator.builders import build_all
from flotilla_operator.builders.common import CONFIG_HASH_ANNOTATION, MANAGED_BY
from flotilla_operator.api.kafka_cluster import KafkaClusterSpec


def test_build_all(owner, spec):
    desired = build_all(owner, spec, image="flotilla:default")
    kinds = [o["kind"] for o in desired.objects]
    assert kinds == ["ServiceAccount", "RoleBinding", "Role", "RoleBinding", "ConfigMap", "Service", "Service", "PodDisruptionBudget", "StatefulSet"]
    for obj in desired.objects:
        assert obj["metadata"]["namespace"] == "kafka"
        assert obj["metadata"]["ownerReferences"][0]["uid"] == owner.uid
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == MANAGED_BY
    assert len({(o["kind"], o["metadata"]["name"]) for o in desired.objects}) == len(desired.objects)
    assert desired.statefulset["spec"]["template"]["metadata"]["annotations"][CONFIG_HASH_ANNOTATION] == desired.config_hash
    assert desired.statefulset["spec"]["template"]["spec"]["containers"][0]["image"] == "flotilla:default"
    assert "log.retention.ms=3600000" in desired.server_properties


def test_config_change_changes_hash_but_scaling_does_not(owner):
    base = build_all(owner, KafkaClusterSpec.model_validate({"replicas": 3}), image="i")
    scaled = build_all(owner, KafkaClusterSpec.model_validate({"replicas": 5}), image="i")
    changed = build_all(owner, KafkaClusterSpec.model_validate({"replicas": 3, "config": {"num.partitions": 6}}), image="i")
    assert base.config_hash == scaled.config_hash
    assert base.config_hash != changed.config_hash


def test_spec_image_wins(owner):
    spec = KafkaClusterSpec.model_validate({"image": "mine:1"})
    assert build_all(owner, spec, image="default:1").statefulset["spec"]["template"]["spec"]["containers"][0]["image"] == "mine:1"


def test_which_existing_objects_are_the_clusters_to_apply_over(owner):
    """builders.common.foreign: absent, owned by this KafkaCluster or a predecessor of its name, or
    orphaned with our labels: ours. Anything else (a user's object, another controller's): not."""
    from flotilla_operator.builders.common import MANAGED_BY, foreign, labels, owner_reference

    mine = {"kind": "Service", "metadata": {"name": "demo-bootstrap", "ownerReferences": [owner_reference(owner)]}}
    predecessor = {"kind": "Service", "metadata": {"name": "demo-bootstrap", "ownerReferences": [
        {**owner_reference(owner), "uid": "old"}]}}
    orphaned = {"kind": "Service", "metadata": {"name": "demo-bootstrap", "labels": labels(owner)}}
    assert [foreign(o, owner) for o in (None, mine, predecessor, orphaned)] == [None] * 4
    users = {"kind": "Service", "metadata": {"name": "demo-bootstrap", "labels": {"app": "mine"}}}
    other_cluster = {"kind": "Service", "metadata": {"name": "demo-bootstrap", "labels": {
        "app.kubernetes.io/managed-by": MANAGED_BY, "flotilla.io/cluster": "other"}}}
    helm = {"kind": "Service", "metadata": {"name": "demo-bootstrap", "ownerReferences": [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": "u", "controller": True}]}}
    assert "not created by the operator" in foreign(users, owner)
    assert "not created by the operator" in foreign(other_cluster, owner)
    assert foreign(helm, owner) == "Service demo-bootstrap exists and is controlled by Deployment web"
