"""`flotilla image build --push`: the destination and the buildah argv (pure); the build and the
push themselves run in tests/e2e/test_image_push.py against a local registry."""

from __future__ import annotations

from pathlib import Path

from flotilla.testenv import dockerfile_image as di


def test_a_destination_without_transport_is_a_registry_reference():
    assert di.with_transport("registry.example.com/team/flotilla:1.0") == "docker://registry.example.com/team/flotilla:1.0"
    assert di.with_transport("127.0.0.1:5000/flotilla:dev") == "docker://127.0.0.1:5000/flotilla:dev"
    for kept in ("docker://r/f:1", "oci:/tmp/layout:flotilla:1", "oci-archive:/tmp/f.tar", "dir:/tmp/d"):
        assert di.with_transport(kept) == kept


def test_push_argv_uses_the_projects_storage_and_passes_registry_options_only_to_registries():
    root = Path("/cache")
    argv = di.push_argv(root, "flotilla.local/flotilla:k", "docker://r.example/flotilla:1", tls_verify=False,
                        authfile="/auth.json")
    assert argv[:argv.index("push")] == di.buildah(root)
    assert argv[argv.index("push"):] == ["push", "--quiet", "--tls-verify=false", "--authfile", "/auth.json",
                                         "flotilla.local/flotilla:k", "docker://r.example/flotilla:1"]
    local = di.push_argv(root, "n:k", "oci:/tmp/l:f", tls_verify=False, authfile="/a")
    assert local[local.index("push"):] == ["push", "--quiet", "n:k", "oci:/tmp/l:f"]


def test_the_command_is_routed_and_calls_build_then_push(monkeypatch, capsys):
    from flotilla import cli

    calls = []
    monkeypatch.setattr(di, "build", lambda base_image=None: calls.append(("build", base_image)) or
                        ("flotilla.local/flotilla:k", Path("/x.tar")))
    monkeypatch.setattr(di, "push", lambda name, dest, tls_verify, authfile: calls.append(
        ("push", name, dest, tls_verify, authfile)) or di.with_transport(dest))
    assert cli.main(["image", "build", "--push", "r.example/flotilla:1", "--tls-verify", "false"]) == 0
    assert calls == [("build", None), ("push", "flotilla.local/flotilla:k", "r.example/flotilla:1", False, None)]
    assert capsys.readouterr().out.splitlines() == ["flotilla.local/flotilla:k /x.tar",
                                                    "pushed docker://r.example/flotilla:1"]


def test_a_failed_build_is_one_clear_line(monkeypatch, capsys):
    from flotilla import cli

    def fail(base_image=None):
        raise di.ImageBuildError("buildah not found: apt-get install buildah")

    monkeypatch.setattr(di, "build", fail)
    assert cli.main(["image", "build"]) == 1
    assert capsys.readouterr().err.strip() == "flotilla image build: buildah not found: apt-get install buildah"
