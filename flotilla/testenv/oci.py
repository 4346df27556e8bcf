"""Writing OCI image-layout tarballs from root filesystems, without Docker or a registry.

An image here is a list of layers (each a directory tree turned into a gzip'd tar with files owned
as on disk) plus a config (entrypoint, user, env, ...). `write_image` produces the tar archive of
an OCI image layout (oci-layout, index.json, blobs/sha256/...) that `ctr images import` reads; the
index names the image with both the OCI `ref.name` and containerd's `io.containerd.image.name`
annotations, so it is imported under exactly that name.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
# Fixed mtime for the tar/gzip wrappers: the same tree always gives the same digest.
EPOCH = 0


@dataclass(frozen=True)
class Layer:
    """A gzip'd layer tarball on disk with its two digests (compressed blob, uncompressed diff)."""

    path: Path
    digest: str
    diff_id: str
    size: int


def _normalise(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = min(info.mtime, 2**31 - 1)
    info.uname = info.gname = ""
    return info


def layer_from_dir(root: Path, out: Path) -> Layer:
    """Tar everything under root (ownership and modes kept, paths relative to /) into out (gzip)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    raw = out.with_suffix(".tar.tmp")
    with tarfile.open(raw, "w", format=tarfile.PAX_FORMAT) as tar:
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(dirnames) + sorted(filenames):
                full = Path(dirpath) / name
                arcname = str(full.relative_to(root))
                info = tar.gettarinfo(str(full), arcname)
                if info is None:  # sockets and the like have no place in an image
                    continue
                info = _normalise(info)
                if info.isreg():
                    with open(full, "rb") as f:
                        tar.addfile(info, f)
                else:
                    tar.addfile(info)
    diff = hashlib.sha256()
    with open(raw, "rb") as src, open(out, "wb") as dst:
        with gzip.GzipFile(filename="", fileobj=dst, mode="wb", mtime=EPOCH, compresslevel=1) as gz:
            while chunk := src.read(1 << 20):
                diff.update(chunk)
                gz.write(chunk)
    raw.unlink()
    return Layer(out, "sha256:" + _sha256_file(out), "sha256:" + diff.hexdigest(), out.stat().st_size)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


@dataclass
class ImageConfig:
    """The parts of an OCI image config a pod's container uses."""

    entrypoint: list[str]
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=lambda: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
    user: str = ""
    working_dir: str = ""
    exposed_ports: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)

    def to_json(self, diff_ids: list[str]) -> dict:
        config: dict = {"Entrypoint": self.entrypoint, "Env": self.env}
        if self.cmd:
            config["Cmd"] = self.cmd
        if self.user:
            config["User"] = self.user
        if self.working_dir:
            config["WorkingDir"] = self.working_dir
        if self.exposed_ports:
            config["ExposedPorts"] = {p: {} for p in self.exposed_ports}
        if self.labels:
            config["Labels"] = self.labels
        return {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
            # One entry per layer: builders (buildah) that stack layers on this image check the count.
            "history": [{"created_by": "flotilla testenv"} for _ in diff_ids],
        }


def _blob(data: bytes) -> tuple[str, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), data


def write_image(name: str, layers: list[Layer], config: ImageConfig, out: Path) -> Path:
    """Write an OCI image-layout tar archive named `name` (e.g. flotilla.local/pause:1) to out."""
    config_digest, config_bytes = _blob(json.dumps(config.to_json([l.diff_id for l in layers]),
                                                   sort_keys=True).encode())
    manifest = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": {"mediaType": MEDIA_CONFIG, "digest": config_digest, "size": len(config_bytes)},
        "layers": [{"mediaType": MEDIA_LAYER, "digest": l.digest, "size": l.size} for l in layers],
    }
    manifest_digest, manifest_bytes = _blob(json.dumps(manifest, sort_keys=True).encode())
    index = {
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": MEDIA_MANIFEST,
            "digest": manifest_digest,
            "size": len(manifest_bytes),
            "platform": {"architecture": "amd64", "os": "linux"},
            "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name},
        }],
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, suffix=".tmp")
    os.close(fd)
    with tarfile.open(tmp, "w") as tar:
        def add_bytes(arcname: str, data: bytes) -> None:
            info = tarfile.TarInfo(arcname)
            info.size = len(data)
            info.mtime = EPOCH
            tar.addfile(info, io.BytesIO(data))

        add_bytes("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add_bytes("index.json", json.dumps(index, sort_keys=True).encode())
        add_bytes(f"blobs/sha256/{config_digest[7:]}", config_bytes)
        add_bytes(f"blobs/sha256/{manifest_digest[7:]}", manifest_bytes)
        for layer in layers:
            tar.add(str(layer.path), f"blobs/sha256/{layer.digest[7:]}", filter=lambda i: _fixed(i))
    os.replace(tmp, out)
    return out


def _fixed(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.mtime = EPOCH
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info
