"""Detecting what is built, and failing clearly without Go."""

import pytest

from flotilla.testenv import build, versions


def _fake_install(bin_dir, binary, pin=None):
    bin_dir.mkdir(parents=True, exist_ok=True)
    exe = bin_dir / binary.name
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    (bin_dir / f".{binary.name}.pin").write_text((pin or binary.pin) + "\n")


def test_everything_missing_in_an_empty_cache(tmp_path):
    assert build.missing(tmp_path / "bin") == [b.name for b in versions.BINARIES]


def test_built_binaries_are_detected_and_a_changed_pin_is_not(tmp_path):
    bin_dir = tmp_path / "bin"
    for b in versions.BINARIES:
        _fake_install(bin_dir, b)
    assert build.missing(bin_dir) == []
    etcd = next(b for b in versions.BINARIES if b.name == "etcd")
    _fake_install(bin_dir, etcd, pin="go.etcd.io/etcd/server/v3@v3.5.0")
    assert build.missing(bin_dir) == ["etcd"]


def test_a_binary_without_its_stamp_counts_as_missing(tmp_path):
    bin_dir = tmp_path / "bin"
    for b in versions.BINARIES:
        _fake_install(bin_dir, b)
    (bin_dir / ".helm.pin").unlink()
    assert build.missing(bin_dir) == ["helm"]


def test_no_go_names_what_to_install(monkeypatch):
    monkeypatch.setattr(build.shutil, "which", lambda name: None)
    monkeypatch.setattr(build.os, "access", lambda path, mode: False)
    with pytest.raises(build.BuildError, match=r"go not found on PATH: install Go >= 1\.\d+"):
        build.find_go()


def test_cache_layout_is_keyed_by_kubernetes_version(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOTILLA_TESTENV_CACHE", str(tmp_path))
    assert versions.bin_dir() == tmp_path / versions.KUBERNETES_VERSION / "bin"
    assert versions.go_mod_cache() == tmp_path / "go" / "mod"


def test_write_module_keeps_go_sum_until_the_generated_text_changes(tmp_path):
    build._write_module(tmp_path, "module a\n")
    (tmp_path / "go.mod").write_text("module a\n\nrequire x v1\n")  # as `go build -mod=mod` leaves it
    (tmp_path / "go.sum").write_text("x v1 h1:...\n")
    build._write_module(tmp_path, "module a\n")
    assert (tmp_path / "go.sum").exists()
    assert "require x" in (tmp_path / "go.mod").read_text()
    build._write_module(tmp_path, "module b\n")
    assert not (tmp_path / "go.sum").exists()
    assert (tmp_path / "go.mod").read_text() == "module b\n"


FAKE_GO = r'''#!/usr/bin/env python3
"""A stand-in `go`: records each call (argv, start, end) and makes the files a real one would."""
import json, os, sys, time
from pathlib import Path
calls = Path(os.environ["FAKE_GO_CALLS"])
start = time.monotonic()
args = sys.argv[1:]
if args[:3] == ["mod", "download", "-json"]:
    mod = Path.cwd() / "upstream.mod"
    mod.write_text("module k8s.io/kubernetes\n\ngo 1.24\n")
    module = Path.cwd() / "module"  # the module's files (cert-manager's CRDs)
    (module / "deploy" / "crds").mkdir(parents=True, exist_ok=True)
    (module / "deploy" / "crds" / "crd-issuers.yaml").write_text("kind: CustomResourceDefinition\n")
    print(json.dumps({"GoMod": str(mod), "Dir": str(module)}))
elif args[0] == "build":
    out = args[args.index("-o") + 1]
    time.sleep(0.3)
    names = [a.rsplit("/", 1)[-1] for a in args[args.index("-o") + 2:]]
    for name in names:
        target = Path(out) / name if out.endswith(os.sep) else Path(out)
        target.write_text("#!/bin/sh\n")
elif args[0] == "install":
    name = args[-1].split("@")[0].rsplit("/", 1)[-1]
    name = {"coredns": "coredns"}.get(name, name)
    time.sleep(0.1)
    (Path(os.environ["GOBIN"]) / name).write_text("#!/bin/sh\n")
with calls.open("a") as f:
    f.write(json.dumps({"argv": args, "start": start, "end": time.monotonic()}) + "\n")
'''


def test_a_fresh_build_is_one_kubernetes_build_with_the_tools_beside_it(tmp_path, monkeypatch):
    """Every binary is built and installed with its stamp; the Kubernetes binaries in one `go build`
    (one package graph), the tools with modules of their own in a thread beside it."""
    import json

    go = tmp_path / "go"
    go.write_text(FAKE_GO)
    go.chmod(0o755)
    calls = tmp_path / "calls.jsonl"
    monkeypatch.setenv("FAKE_GO_CALLS", str(calls))
    monkeypatch.setattr(build, "_run", lambda what, argv, **kw: build.subprocess.run(
        [a for a in argv], cwd=kw["cwd"], env=kw["env"], capture_output=True, check=True, text=True).stdout)
    builder = build.Builder(tmp_path / "cache", go=str(go))
    builder.build_missing(node=True)
    assert build.missing(builder.bin_dir, node=True) == []
    seen = [json.loads(line) for line in calls.read_text().splitlines()]
    kube_builds = [c for c in seen if c["argv"][0] == "build" and any("k8s.io/kubernetes/cmd/" in a for a in c["argv"])]
    assert len(kube_builds) == 1, kube_builds
    assert sorted(a.rsplit("/", 1)[-1] for a in kube_builds[0]["argv"] if "k8s.io/kubernetes/cmd/" in a) == \
        sorted(versions.KUBE_BINARIES + versions.NODE_KUBE_BINARIES)
    tools = [c for c in seen if c not in kube_builds and c["argv"][:2] != ["mod", "download"]]
    assert len(tools) == 5, tools  # etcd and cert-manager (go build), kwok, helm, coredns (go install)
    assert (versions.cert_manager_crds(tmp_path / "cache") / "crd-issuers.yaml").is_file()
    assert tools[0]["start"] < kube_builds[0]["end"], "the tools waited for the Kubernetes build"
