"""The Docker-free image recipe (flotilla/testenv/images.py) and the Dockerfile stay in step, and the
OCI image-layout writer produces what `ctr images import` needs."""

from __future__ import annotations

import hashlib
import json
import re
import shlex
import tarfile
from pathlib import Path

from flotilla.testenv import images, node, oci

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


def test_same_debian_packages():
    runs = [rest for verb, rest in dockerfile_instructions() if verb == "RUN" and "apt-get install" in rest]
    assert len(runs) == 1, runs
    words = shlex.split(runs[0].split("apt-get install", 1)[1].split("&&")[0])
    assert tuple(w for w in words if not w.startswith("-")) == images.DEBIAN_PACKAGES


def test_same_user_and_directories():
    run = " ".join(rest for verb, rest in dockerfile_instructions() if verb == "RUN" and "useradd" in rest)
    assert f"--gid {images.GID} flotilla" in run
    assert f"--uid {images.UID} --gid {images.GID}" in run
    assert f"mkdir -p {images.DATA_DIR} {images.CONFIG_DIR}" in run
    assert f"chown {images.UID}:{images.GID} {images.DATA_DIR}" in run


def test_same_venv_command_user_and_env():
    stage = dict(final_stage())
    assert json.loads(stage["ENTRYPOINT"]) == images.ENTRYPOINT
    assert json.loads(stage["CMD"]) == images.CMD
    assert stage["USER"] == f"{images.UID}:{images.GID}"
    assert stage["WORKDIR"] == "/var/lib/flotilla"
    assert shlex.split(stage["ENV"]) == images.ENV
    assert f"/opt/flotilla /opt/flotilla" in stage["COPY"] and images.VENV == "/opt/flotilla"
    assert sorted(f"{p}/tcp" for p in stage["EXPOSE"].split()) == sorted(images.EXPOSED)
    build = " ".join(rest for verb, rest in dockerfile_instructions() if verb == "RUN" and "venv" in rest)
    assert re.search(rf"python3 -m venv {images.VENV}\b", build)


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
