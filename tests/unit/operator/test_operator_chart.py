"""The Helm chart: its crds/ folder matches crds/, its values schema accepts its values, and its
RBAC grants what the operator uses (and what it must hold to grant the brokers their Role)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import yaml

from flotilla_operator.clients.kube import KINDS
from flotilla_operator.api import RESOURCES
from flotilla_operator.builders.rbac import (BROKER_CLUSTER_ROLE, BROKER_RULES, acl_rules, broker_config_rules, client_quota_rules, owner_rules,
                                             scram_credential_rules)

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "flotilla"


def test_chart_crds_identical_to_top_level_crds():
    top = {p.name: p.read_text() for p in (ROOT / "crds").glob("*.yaml")}
    chart = {p.name: p.read_text() for p in (CHART / "crds").glob("*.yaml")}
    assert top and top == chart


def test_chart_metadata():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["apiVersion"] == "v2" and chart["name"] == "flotilla" and chart["type"] == "application"


def test_values_match_schema():
    jsonschema = __import__("pytest").importorskip("jsonschema")
    schema = json.loads((CHART / "values.schema.json").read_text())
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    jsonschema.validate(values, schema)
    bad = dict(values, replicaCount="two")
    try:
        jsonschema.validate(bad, schema)
    except jsonschema.ValidationError:
        pass
    else:  # pragma: no cover
        raise AssertionError("schema accepted replicaCount: two")


def _cluster_role_rules() -> list[dict]:
    text = (CHART / "templates" / "rbac.yaml").read_text()
    start = text.index("# rules-begin")
    end = text.index("# rules-end")
    return yaml.safe_load(text[start:end])


def _allowed(rules, group, resource, verb) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules
    )


def test_rbac_covers_what_the_operator_does():
    rules = _cluster_role_rules()
    for kind, (api_version, plural) in KINDS.items():
        group = api_version.rpartition("/")[0]
        if plural == "kafkatopics":  # the brokers write them; the operator labels and marks unlabelled ones
            for verb in ("get", "list", "watch", "patch"):
                assert _allowed(rules, group, plural, verb), (plural, verb)
            assert _allowed(rules, group, "kafkatopics/status", "patch")
            assert not _allowed(rules, group, plural, "create") and not _allowed(rules, group, plural, "delete")
        elif group == "flotilla.io":
            for verb in ("get", "list", "watch", "patch"):
                assert _allowed(rules, group, plural, verb), (plural, verb)
            if next(r for r in RESOURCES if r.plural == plural).status_subresource:
                assert _allowed(rules, group, f"{plural}/status", "patch")
        elif plural in ("pods", "persistentvolumeclaims"):  # read only: the roll gate, pod problems
            for verb in ("get", "list"):
                assert _allowed(rules, group, plural, verb), (plural, verb)
            assert not _allowed(rules, group, plural, "patch")
        elif plural == "secrets":  # created once and compare-and-set, never applied nor deleted
            for verb in ("get", "create", "update"):
                assert _allowed(rules, group, plural, verb), (plural, verb)
            assert not _allowed(rules, group, plural, "delete")
        elif plural == "leases":  # read only: the brokers' Leases for the status
            for verb in ("get", "list", "watch"):
                assert _allowed(rules, group, plural, verb), (plural, verb)
        else:
            for verb in ("create", "patch"):  # server-side apply of a new object needs both
                assert _allowed(rules, group, plural, verb), (plural, verb)
    for verb in ("get", "list", "watch", "delete"):  # delete: replacing it to change podManagementPolicy
        assert _allowed(rules, "apps", "statefulsets", verb)
    assert _allowed(rules, "", "events", "create")
    assert _allowed(rules, "", "pods/log", "get")  # a crash-looping broker's last line


def test_rbac_holds_what_brokers_are_granted():
    """Kubernetes refuses to let the operator create a Role with permissions it lacks, or bind a
    ClusterRole it may not `bind`."""
    rules = _cluster_role_rules()
    assert any(r["apiGroups"] == ["rbac.authorization.k8s.io"] and r["resources"] == ["clusterroles"]
               and r.get("resourceNames") == [BROKER_CLUSTER_ROLE] and r["verbs"] == ["bind"] for r in rules)
    demo = SimpleNamespace(name="demo")
    for rule in [*client_quota_rules(demo), *acl_rules(demo), *broker_config_rules(demo), *scram_credential_rules(demo), *owner_rules(demo)]:
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    assert _allowed(rules, group, resource, verb), (group, resource, verb)


def test_rbac_grants_no_wildcards_or_deletes_beyond_broker_needs():
    rules = _cluster_role_rules()
    for r in rules:
        assert "*" not in r["verbs"] and "*" not in r["resources"] and "*" not in r["apiGroups"]
        if "delete" in r["verbs"]:
            # statefulsets: replaced (pods orphaned, kept) to change the immutable podManagementPolicy;
            # services: a removed broker's or listener's external NodePort Services.
            assert set(r["resources"]) <= {"statefulsets", "services"}, r


def test_the_operator_cannot_write_leases_or_kafkatopics():
    """Issue 23: no write access to every Lease of the cluster (kube-system's leader elections, node
    heartbeats); the brokers get theirs through the flotilla-broker ClusterRole it binds. KafkaTopics:
    patch only (issue 41: labelling those that named their cluster by app.kubernetes.io/instance, and
    the status of one naming no cluster), never create, update or delete."""
    rules = _cluster_role_rules()
    for group, resource, verbs in (("coordination.k8s.io", "leases", ("create", "update", "patch", "delete")),
                                   ("flotilla.io", "kafkatopics", ("create", "update", "delete")),
                                   ("flotilla.io", "kafkatopics/status", ("create", "update", "delete"))):
        for verb in verbs:
            assert not _allowed(rules, group, resource, verb), (resource, verb)
    assert all("bind" not in r["verbs"] or r.get("resourceNames") == [BROKER_CLUSTER_ROLE] for r in rules)
