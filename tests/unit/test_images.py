"""The Dockerfile build for the real node (flotilla/testenv/dockerfile_image.py: buildah, its build
context, cache key and export) and the OCI image-layout writer that `ctr images import` reads."""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path

from flotilla.testenv import dockerfile_image, node, oci

DOCKERFILE = Path(__file__).resolve().parents[2] / "Dockerfile"


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            verb, _, rest = line.partition(" ")
            out.append((verb.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (verb, _) in enumerate(instructions) if verb == "FROM")
    return instructions[last_from:]


def test_runtime_stage_is_the_target_built_without_mounts_and_only_the_venv_leaves_the_build_stage():
    """dockerfile_image builds `--target runtime` first, without bind mounts, so their mount points
    stay out of the image; that holds only while the final stage takes nothing else from `build`."""
    instructions = dockerfile_instructions()
    froms = [rest for verb, rest in instructions if verb == "FROM"]
    assert froms[0] == "${DEBIAN_IMAGE} AS runtime", "the base must stay overridable (--build-arg DEBIAN_IMAGE)"
    assert froms[1] == "runtime AS build" and froms[-1] == "runtime"
    copies_from_build = [rest for verb, rest in final_stage() if verb == "COPY" and "--from=" in rest]
    assert copies_from_build == ["--from=build /opt/flotilla /opt/flotilla"]


def test_dockerignore_lets_in_what_the_dockerfile_copies():
    files = dockerfile_image.context_files(DOCKERFILE.parent)
    sources = [src for verb, rest in dockerfile_instructions() if verb == "COPY" and "--from=" not in rest
               for src in rest.split()[:-1]]
    assert sources, "no COPY found"
    for src in sources:
        assert any(f == src or f.startswith(src.rstrip("/") + "/") for f in files), f"{src} is not in the build context"
    assert not any("__pycache__" in f or f.startswith(("tests/", ".git/", ".venv/")) for f in files)


def _context(root: Path) -> Path:
    (root / "flotilla" / "__pycache__").mkdir(parents=True)
    (root / "flotilla" / "a.py").write_text("A = 1\n")
    (root / "flotilla" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"x")
    (root / "tests").mkdir()
    (root / "tests" / "test_a.py").write_text("")
    (root / "pyproject.toml").write_text("[project]\n")
    (root / "Dockerfile").write_text("FROM x\n")
    (root / ".dockerignore").write_text("# comment\n*\n!pyproject.toml\n!flotilla/\n**/__pycache__\n**/*.pyc\n")
    return root


def test_context_files_follow_dockerignore(tmp_path):
    assert dockerfile_image.context_files(_context(tmp_path)) == ["pyproject.toml", "flotilla/a.py"]


def test_image_key_follows_the_context_and_the_base_only(tmp_path):
    ctx = _context(tmp_path)
    key = dockerfile_image.image_key(ctx, "base:1")
    (ctx / "tests" / "test_a.py").write_text("changed")
    (ctx / "flotilla" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"changed")
    assert dockerfile_image.image_key(ctx, "base:1") == key, "files outside the context changed the key"
    assert dockerfile_image.image_key(ctx, "base:2") != key
    (ctx / "flotilla" / "a.py").write_text("A = 2\n")
    assert dockerfile_image.image_key(ctx, "base:1") != key
    changed = dockerfile_image.image_key(ctx, "base:1")
    (ctx / "Dockerfile").write_text("FROM y\n")
    assert dockerfile_image.image_key(ctx, "base:1") != changed


def test_buildah_uses_its_own_storage_the_local_base_and_no_pulls(tmp_path):
    ctx = _context(tmp_path / "ctx")
    runtime = dockerfile_image.bud_argv(tmp_path, "flotilla.local/debian:bookworm-x", ctx, tag=None, mounts=[])
    full = dockerfile_image.bud_argv(tmp_path, "flotilla.local/debian:bookworm-x", ctx, tag="flotilla.local/flotilla:k",
                                     mounts=["/a:/run/flotilla-build/ca-certificates.crt:ro"])
    for argv in (runtime, full):
        assert argv[argv.index("--root") + 1].startswith(str(tmp_path)), "must not use /var/lib/containers"
        assert "--pull=never" in argv and "--layers" in argv
        assert argv[argv.index("--build-arg") + 1] == "DEBIAN_IMAGE=flotilla.local/debian:bookworm-x"
        assert argv[-3:] == ["--file", str(ctx / "Dockerfile"), str(ctx)]
    assert runtime[runtime.index("--target") + 1] == "runtime" and "--volume" not in runtime
    assert full[full.index("--tag") + 1] == "flotilla.local/flotilla:k" and "--target" not in full
    assert full[full.index("--volume") + 1] == "/a:/run/flotilla-build/ca-certificates.crt:ro"


def test_every_build_mount_is_checked_for_in_the_image(tmp_path):
    mounts = dockerfile_image._build_mounts(tmp_path)
    assert mounts, "the host has a CA bundle; it must be mounted for pip"
    for m in mounts:
        host, dest, mode = m.split(":")
        assert Path(host).is_file() and mode == "ro"
        assert any(dest == p or dest.startswith(p + "/") for p in dockerfile_image._BUILD_MOUNTS), dest


def test_exported_layout_is_named_for_containerd(tmp_path):
    (tmp_path / "index.json").write_text(json.dumps({"schemaVersion": 2, "manifests": [
        {"mediaType": oci.MEDIA_MANIFEST, "digest": "sha256:00", "size": 1,
         "annotations": {"org.opencontainers.image.ref.name": "other"}}]}))
    dockerfile_image.name_for_containerd(tmp_path, "flotilla.local/flotilla:k")
    (manifest,) = json.loads((tmp_path / "index.json").read_text())["manifests"]
    assert manifest["annotations"] == {"io.containerd.image.name": "flotilla.local/flotilla:k",
                                       "org.opencontainers.image.ref.name": "flotilla.local/flotilla:k"}


def test_oci_layout_is_importable_shape(tmp_path):
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "bin" / "hello").write_text("#!/bin/sh\necho hi\n")
    (root / "bin" / "hello").chmod(0o755)
    layer = oci.layer_from_dir(root, tmp_path / "layer.tar.gz")
    again = oci.layer_from_dir(root, tmp_path / "again.tar.gz")
    assert (layer.digest, layer.diff_id) == (again.digest, again.diff_id), "layers must be reproducible"
    out = oci.write_image("flotilla.local/test:1", [layer], oci.ImageConfig(entrypoint=["/bin/hello"], user="1:1"),
                          tmp_path / "image.tar")
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
        index = json.load(tar.extractfile("index.json"))
        (desc,) = index["manifests"]
        assert desc["annotations"]["io.containerd.image.name"] == "flotilla.local/test:1"
        manifest_bytes = tar.extractfile(f"blobs/sha256/{desc['digest'][7:]}").read()
        assert "sha256:" + hashlib.sha256(manifest_bytes).hexdigest() == desc["digest"]
        manifest = json.loads(manifest_bytes)
        config = json.load(tar.extractfile(f"blobs/sha256/{manifest['config']['digest'][7:]}"))
        assert config["rootfs"]["diff_ids"] == [layer.diff_id]
        # buildah refuses to build on an image whose history does not count its layers.
        assert len([h for h in config["history"] if not h.get("empty_layer")]) == 1
        assert config["config"]["User"] == "1:1"
        assert {"oci-layout", f"blobs/sha256/{layer.digest[7:]}"} <= names
        blob = tar.extractfile(f"blobs/sha256/{layer.digest[7:]}").read()
        assert "sha256:" + hashlib.sha256(blob).hexdigest() == layer.digest
    with tarfile.open(tmp_path / "layer.tar.gz") as t:
        member = t.getmember("bin/hello")
        assert member.mode & 0o111


def test_node_configuration_pins_what_this_machine_needs(tmp_path):
    kubelet = node.kubelet_config(tmp_path, tmp_path / "ca.crt", {"kubelet": 1, "kubelet_healthz": 2},
                                  node.CLUSTER_DNS_IP)
    assert kubelet["failCgroupV1"] is False and kubelet["cgroupDriver"] == "cgroupfs"
    assert kubelet["clusterDNS"] == [node.CLUSTER_DNS_IP]
    assert str(tmp_path) in kubelet["containerRuntimeEndpoint"]
    toml = node.containerd_config(tmp_path, "/usr/lib/cni")
    assert "restrict_oom_score_adj = true" in toml and "netns_mounts_under_state_dir = true" in toml
    cni = node.cni_config(tmp_path)
    assert [p["type"] for p in cni["plugins"]] == ["bridge", "portmap"]
    assert cni["plugins"][0]["ipMasq"] is False
    storage = node.storage_manifests(tmp_path, count=3)
    (sc, *pvs) = storage["items"]
    assert sc["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert len({pv["spec"]["local"]["path"] for pv in pvs}) == 3


def test_a_second_real_node_waits_for_the_first_then_says_why(tmp_path, monkeypatch):
    import fcntl

    monkeypatch.setattr(node, "LOCK_FILE", tmp_path / "node.lock")
    monkeypatch.setattr(node, "running_kubelets", lambda: [])
    first = node.Node.__new__(node.Node)
    first._take_the_machine(timeout=1)
    second = node.Node.__new__(node.Node)
    try:
        second._take_the_machine(timeout=0.5)
    except node.NodeError as exc:
        assert "another real test node runs on this machine" in str(exc)
    else:
        raise AssertionError("the second node took the machine while the first held it")
    fcntl.flock(first._lock, fcntl.LOCK_UN)
    first._lock.close()
    second._take_the_machine(timeout=1)


def test_dependency_layer_installs_exactly_the_projects_dependencies(tmp_path):
    """The Dockerfile's dependencies step reads pyproject.toml with a one-line Python; run that line."""
    import shlex
    import subprocess
    import sys
    import tomllib

    (run,) = [rest for verb, rest in dockerfile_instructions() if verb == "RUN" and "tomllib" in rest]
    words = shlex.split(run)
    script = words[words.index("-c") + 1]
    (tmp_path / "pyproject.toml").write_bytes((DOCKERFILE.parent / "pyproject.toml").read_bytes())
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
    wanted = tomllib.loads((DOCKERFILE.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    assert out.splitlines() == wanted and len(wanted) > 5
    assert "pip install --no-deps ." in " ".join(rest for verb, rest in dockerfile_instructions() if verb == "RUN")
