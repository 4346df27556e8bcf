"""install/flotilla.yaml, the one-command install, and install/flotilla-all-namespaces.yaml: what
the script renders from the chart, and shaped so `kubectl apply --server-side -f` can install them
(Namespace first, CRDs whole, RBAC the chart's); the default manages its own namespace only."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flotilla import install_render

ROOT = Path(__file__).resolve().parents[3]
MANIFEST = ROOT / "install" / "flotilla.yaml"
ALL_NAMESPACES = ROOT / "install" / "flotilla-all-namespaces.yaml"
BOTH = pytest.mark.parametrize("path", [MANIFEST, ALL_NAMESPACES], ids=["default", "all-namespaces"])


@pytest.fixture(scope="module")
def helm():
    try:
        return install_render.helm_binary()
    except install_render.HelmMissing as exc:
        pytest.skip(str(exc))


def _docs(path: Path = MANIFEST):
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@BOTH
def test_committed_manifest_is_fresh(helm, path):
    assert not install_render.is_stale(path, helm, all_namespaces=path == ALL_NAMESPACES), \
        f"install/{path.name} is stale: run `python -m flotilla.install_render`"


def test_stale_detection(helm, tmp_path):
    copy = tmp_path / "flotilla.yaml"
    copy.write_text(install_render.render(helm))
    assert not install_render.is_stale(copy, helm)
    copy.write_text(copy.read_text().replace('verbs: ["patch"]', 'verbs: ["get", "patch"]', 1))
    assert install_render.is_stale(copy, helm)
    assert install_render.is_stale(tmp_path / "missing.yaml", helm)


@BOTH
def test_namespace_comes_first_and_holds_every_namespaced_object(path):
    docs = _docs(path)
    assert (docs[0]["kind"], docs[0]["metadata"]["name"]) == ("Namespace", "flotilla")
    for d in docs:
        if d["kind"] in {"ServiceAccount", "Deployment", "Role", "RoleBinding", "ConfigMap", "Service"}:
            assert d["metadata"]["namespace"] == "flotilla", (d["kind"], d["metadata"]["name"])
        for subject in d.get("subjects", []):
            assert subject["namespace"] == "flotilla"
    assert "managed-by: Helm" not in path.read_text()


@BOTH
def test_crds_are_the_rendered_ones(path):
    rendered = {d["metadata"]["name"]: d for d in _docs(path) if d["kind"] == "CustomResourceDefinition"}
    expected = {}
    for path in (ROOT / "crds").glob("*.yaml"):
        d = yaml.safe_load(path.read_text())
        if d["kind"] == "CustomResourceDefinition":
            expected[d["metadata"]["name"]] = d
    assert expected and rendered == expected


def _bindings(docs) -> list[tuple[str, str | None]]:
    return sorted((d["kind"], d["metadata"].get("namespace")) for d in docs
                  if d["kind"] in {"RoleBinding", "ClusterRoleBinding"} and d["roleRef"]["name"] == "flotilla-operator")


def _args(docs) -> list[str]:
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "flotilla-operator"
    return pod["containers"][0]["args"]


@BOTH
def test_operator_role_is_the_charts(path):
    text = (ROOT / "charts" / "flotilla" / "templates" / "rbac.yaml").read_text()
    chart_rules = yaml.safe_load(text[text.index("# rules-begin"):text.index("# rules-end")])
    roles = {d["metadata"]["name"]: d for d in _docs(path) if d["kind"] == "ClusterRole"}
    assert roles["flotilla-operator"]["rules"] == chart_rules


def test_the_default_manages_its_own_namespace_only():
    """Issue 38: the operator's rights (Secrets, RoleBindings...) reach the `flotilla` namespace
    through a RoleBinding there, and it watches that namespace alone."""
    docs = _docs()
    assert _bindings(docs) == [("RoleBinding", "flotilla")]
    args = _args(docs)
    assert "--namespace=flotilla" in args and "--all-namespaces" not in args
    assert [a for a in args if a.startswith("--namespace")] == ["--namespace=flotilla"]


def test_the_all_namespaces_manifest_differs_only_in_its_scope():
    docs = _docs(ALL_NAMESPACES)
    assert _bindings(docs) == [("ClusterRoleBinding", None)]
    args = _args(docs)
    assert "--all-namespaces" in args and not [a for a in args if a.startswith("--namespace")]
    # Everything else is the default manifest's: same CRDs, roles, account and pod but for its args.
    def rest(d):
        if d["kind"] == "Deployment":
            d = yaml.safe_load(yaml.safe_dump(d))
            d["spec"]["template"]["spec"]["containers"][0]["args"] = [
                a for a in d["spec"]["template"]["spec"]["containers"][0]["args"] if "namespace" not in a]
        return d

    def others(ds):
        return [rest(d) for d in ds if not (d["kind"] in {"RoleBinding", "ClusterRoleBinding"}
                                            and d["roleRef"]["name"] == "flotilla-operator")]

    default, wide = others(_docs()), others(docs)
    crds_role = lambda ds: next(d for d in ds if d["metadata"]["name"] == "flotilla-operator-crds"  # noqa: E731
                                and d["kind"] == "ClusterRole")
    # kopf lists and watches Namespaces only when it watches some of them.
    assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]} in crds_role(default)["rules"]
    assert crds_role(wide)["rules"] == [r for r in crds_role(default)["rules"] if r["resources"] != ["namespaces"]]
    assert [d for d in default if d["metadata"]["name"] != "flotilla-operator-crds"] == \
        [d for d in wide if d["metadata"]["name"] != "flotilla-operator-crds"]


@pytest.mark.parametrize("all_namespaces", [False, True])
def test_one_value_sets_the_image_of_the_operator_and_of_the_brokers(helm, all_namespaces):
    """`--image` (the chart's image.reference): the operator's container and the brokers' default
    image, and nothing else of the manifest, change."""
    ref = "registry.example.com:5000/team/flotilla@sha256:" + "ab" * 32
    text = install_render.render(helm, image=ref, all_namespaces=all_namespaces)
    (deploy,) = [d for d in yaml.safe_load_all(text) if d and d["kind"] == "Deployment"]
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert container["image"] == ref and env["FLOTILLA_BROKER_IMAGE"] == ref
    default = install_render.render(helm, all_namespaces=all_namespaces)
    changed = [(a, b) for a, b in zip(default.splitlines(), text.splitlines()) if a != b]
    assert len(changed) == 2 and all(ref in b for _, b in changed)


def test_the_cli_writes_and_checks_both_manifests(helm, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(install_render, "MANIFEST", tmp_path / "flotilla.yaml")
    monkeypatch.setattr(install_render, "ALL_NAMESPACES_MANIFEST", tmp_path / "flotilla-all-namespaces.yaml")
    assert install_render.main(["--check"]) == 1
    assert install_render.main([]) == 0
    assert install_render.main(["--check"]) == 0
    assert (tmp_path / "flotilla-all-namespaces.yaml").read_text() == ALL_NAMESPACES.read_text()
    (tmp_path / "flotilla-all-namespaces.yaml").write_text("stale")
    assert install_render.main(["--check"]) == 1
    assert "flotilla-all-namespaces.yaml is stale" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        install_render.main(["--all-namespaces"])  # without --image: both are written anyway
