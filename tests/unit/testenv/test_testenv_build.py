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
