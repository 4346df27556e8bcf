"""install/flotilla.yaml, the one-command install: what the script renders from the chart, and
shaped so `kubectl apply --server-side -f` can install it (Namespace first, CRDs whole, RBAC the
chart's)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flotilla import install_render

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "install" / "flotilla.yaml"


@pytest.fixture(scope="module")
def helm():
    try:
        return install_render.helm_binary()
    except install_render.HelmMissing as exc:
        pytest.skip(str(exc))


def _docs():
    return [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]


def test_committed_manifest_is_fresh(helm):
    assert not install_render.is_stale(MANIFEST, helm), "install/flotilla.yaml is stale: run `python -m flotilla.install_render`"


def test_stale_detection(helm, tmp_path):
    copy = tmp_path / "flotilla.yaml"
    copy.write_text(install_render.render(helm))
    assert not install_render.is_stale(copy, helm)
    copy.write_text(copy.read_text().replace('verbs: ["patch"]', 'verbs: ["get", "patch"]', 1))
    assert install_render.is_stale(copy, helm)
    assert install_render.is_stale(tmp_path / "missing.yaml", helm)


def test_namespace_comes_first_and_holds_every_namespaced_object():
    docs = _docs()
    assert (docs[0]["kind"], docs[0]["metadata"]["name"]) == ("Namespace", "flotilla")
    for d in docs:
        if d["kind"] in {"ServiceAccount", "Deployment", "Role", "RoleBinding", "ConfigMap", "Service"}:
            assert d["metadata"]["namespace"] == "flotilla", (d["kind"], d["metadata"]["name"])
        for subject in d.get("subjects", []):
            assert subject["namespace"] == "flotilla"
    assert "managed-by: Helm" not in MANIFEST.read_text()


def test_crds_are_the_rendered_ones():
    rendered = {d["metadata"]["name"]: d for d in _docs() if d["kind"] == "CustomResourceDefinition"}
    expected = {}
    for path in (ROOT / "crds").glob("*.yaml"):
        d = yaml.safe_load(path.read_text())
        if d["kind"] == "CustomResourceDefinition":
            expected[d["metadata"]["name"]] = d
    assert expected and rendered == expected


def test_operator_role_is_the_charts():
    text = (ROOT / "charts" / "flotilla" / "templates" / "rbac.yaml").read_text()
    chart_rules = yaml.safe_load(text[text.index("# rules-begin"):text.index("# rules-end")])
    roles = {d["metadata"]["name"]: d for d in _docs() if d["kind"] == "ClusterRole"}
    assert roles["flotilla-operator"]["rules"] == chart_rules
    deployment = next(d for d in _docs() if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "flotilla-operator"
    assert "--all-namespaces" in pod["containers"][0]["args"]


def test_one_value_sets_the_image_of_the_operator_and_of_the_brokers(helm):
    """`--image` (the chart's image.reference): the operator's container and the brokers' default
    image, and nothing else of the manifest, change."""
    import yaml

    ref = "registry.example.com:5000/team/flotilla@sha256:" + "ab" * 32
    text = install_render.render(helm, image=ref)
    (deploy,) = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Deployment"]
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert container["image"] == ref and env["FLOTILLA_BROKER_IMAGE"] == ref
    default = install_render.render(helm)
    changed = [(a, b) for a, b in zip(default.splitlines(), text.splitlines()) if a != b]
    assert len(changed) == 2 and all(ref in b for _, b in changed)
