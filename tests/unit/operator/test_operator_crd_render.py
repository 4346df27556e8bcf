"""CRDs rendered from the models: up to date, structural, documented."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flotilla_operator import crd_render
from flotilla_operator.api import RESOURCES
from flotilla_operator.api.kafka_cluster import KAFKA_CLUSTER, OPERATOR_OWNED_CONFIG_KEYS

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("directory", ["crds", "charts/flotilla/crds"])
def test_committed_crds_are_fresh(directory):
    stale = crd_render.stale_files(ROOT / directory)
    assert not stale, f"{directory} is stale ({stale}): run `python -m flotilla_operator.crd_render`"


def test_stale_detection(tmp_path):
    crd_render.write_all(tmp_path)
    assert crd_render.stale_files(tmp_path) == []
    target = tmp_path / crd_render.file_name(KAFKA_CLUSTER)
    target.write_text(target.read_text().replace("minimum: 1", "minimum: 0"))
    (tmp_path / "extra.yaml").write_text("{}")
    assert crd_render.stale_files(tmp_path) == sorted([target.name, "extra.yaml"])


def test_check_mode_exit_code(tmp_path, monkeypatch):
    monkeypatch.setattr(crd_render, "CRD_DIRS", (tmp_path,))
    assert crd_render.main(["--check"]) == 1
    assert crd_render.main([]) == 0
    assert crd_render.main(["--check"]) == 0


def _walk(node, path="openAPIV3Schema"):
    yield path, node
    for name, prop in (node.get("properties") or {}).items():
        yield from _walk(prop, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        yield from _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _walk(node["additionalProperties"], f"{path}{{}}")


def _schema(resource):
    return crd_render.crd(resource)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
def test_schema_is_structural(resource):
    for path, node in _walk(_schema(resource)):
        for banned in ("$ref", "anyOf", "allOf", "oneOf", "title", "const", "$defs"):
            assert banned not in node, f"{path} has {banned}"
        if "properties" in node:
            assert "additionalProperties" not in node, path
        if not node.get("x-kubernetes-int-or-string"):
            assert node.get("type") in {"object", "array", "string", "integer", "boolean", "number"}, path
        assert node.get("default", 0) is not None, f"{path} has default: null"


@pytest.mark.parametrize("resource", RESOURCES, ids=lambda r: r.kind)
def test_every_field_is_described(resource):
    """`kubectl explain` shows these."""
    for path, node in _walk(_schema(resource)):
        if path.endswith((".metadata", "[]", "{}")):
            continue
        assert node.get("description"), f"{path} has no description"


def test_kafkacluster_crd_shape():
    crd = crd_render.crd(KAFKA_CLUSTER)
    version = crd["spec"]["versions"][0]
    assert crd["metadata"]["name"] == "kafkaclusters.flotilla.io"
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.replicas"
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["replicas"] == {
        "default": 3, "description": spec["properties"]["replicas"]["description"],
        "maximum": 64, "minimum": 1, "type": "integer",
    }
    config = spec["properties"]["config"]
    assert config["additionalProperties"] == {"x-kubernetes-int-or-string": True}
    rules = {r["rule"]: r["message"] for r in config["x-kubernetes-validations"]}
    for key in OPERATOR_OWNED_CONFIG_KEYS:
        assert rules[f"!('{key}' in self)"].startswith(f"spec.config must not set {key}:")
    assert "oldSelf.size" in spec["properties"]["storage"]["x-kubernetes-validations"][0]["rule"]
    assert spec["properties"]["listeners"]["x-kubernetes-list-type"] == "map"
    affinity = spec["properties"]["template"]["properties"]["affinity"]
    assert affinity["x-kubernetes-preserve-unknown-fields"] is True and affinity["type"] == "object"


def test_every_cel_message_names_a_field():
    for resource in RESOURCES:
        text = yaml.safe_dump(crd_render.crd(resource))
        for doc_rule in _rules(_schema(resource)):
            assert doc_rule["message"].split()[0].startswith(("spec", "metadata", "status")), doc_rule
        assert "x-kubernetes-validations" in text


def _rules(node):
    yield from node.get("x-kubernetes-validations", [])
    for child in (node.get("properties") or {}).values():
        yield from _rules(child)
    if isinstance(node.get("items"), dict):
        yield from _rules(node["items"])


def test_storage_default_matches_the_model():
    """The CRD's spelled-out storage default must be what the model defaults to."""
    from flotilla_operator.api.kafka_cluster import Storage

    spec = _schema(KAFKA_CLUSTER)["properties"]["spec"]
    assert spec["properties"]["storage"]["default"] == Storage().to_k8s()


# Strimzi's short names (its CRDs' spec.names.shortNames): ours must differ, so both operators
# can be installed in one cluster and `kubectl get kt` keeps meaning Strimzi's topics.
STRIMZI_SHORT_NAMES = {"k", "kt", "ku", "kc", "kctr", "kmm", "kmm2", "kb", "kr", "knp", "spsc"}


def test_short_names_do_not_collide_with_strimzi():
    ours = [name for resource in RESOURCES for name in resource.short_names]
    assert ours and len(ours) == len(set(ours))
    assert not STRIMZI_SHORT_NAMES & set(ours), STRIMZI_SHORT_NAMES & set(ours)


# Strimzi's short names (its CRDs in strimzi-kafka-operator's install/cluster-operator) and
# kubectl's built-in ones: both kinds of names must keep working next to ours.
STRIMZI_SHORT_NAMES = {"k", "kt", "ku", "kc", "kctr", "kmm", "kmm2", "kb", "kr", "knp", "sps"}
KUBECTL_SHORT_NAMES = {"cm", "cs", "csr", "crd", "cj", "deploy", "ds", "ep", "ev", "hpa", "ing", "limits", "netpol",
                       "no", "ns", "pc", "pdb", "po", "pv", "pvc", "quota", "rc", "rs", "sa", "sc", "sts", "svc"}


def test_short_names_do_not_collide_with_strimzi_or_kubectl():
    """Flotilla and Strimzi can be installed side by side: `kubectl get kt` stays Strimzi's."""
    from flotilla_operator.api import RESOURCES

    ours = [n for r in RESOURCES for n in r.short_names]
    assert len(ours) == len(set(ours))
    assert not set(ours) & (STRIMZI_SHORT_NAMES | KUBECTL_SHORT_NAMES)
    assert {r.kind: r.short_names for r in RESOURCES}["KafkaTopic"] == ["fkt"]
