"""Images for the real test node made without Docker or a registry: the pause image and the local
Debian base that the Dockerfile is built on.

Docker Hub's debian:bookworm-slim cannot be pulled here, so `debian_base` makes its stand-in from
Debian's own packages: `debootstrap --variant=minbase bookworm` without apt's caches, as one OCI
layer. dockerfile_image.py builds the repository's Dockerfile on it with buildah
(`--build-arg DEBIAN_IMAGE=<its name>`). The pause image is Debian's static `catatonit -P`.
Both are cached under ~/.cache/flotilla/testenv/images/. debootstrap needs root.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from . import oci, versions

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
PAUSE_IMAGE = "flotilla.local/pause:1"
DEBIAN_IMAGE = "flotilla.local/debian"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def log(message: str) -> None:
    print(f"[testenv] {message}", file=sys.stderr, flush=True)


def images_dir(root: Path | None = None) -> Path:
    return (root or versions.cache_root()) / "images"


def _run(argv: list[str], **kw) -> subprocess.CompletedProcess:
    if shutil.which("nice"):
        argv = ["nice", "-n", "10", *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


# --- pause ------------------------------------------------------------------------------------------


def build_pause(root: Path | None = None) -> Path:
    """flotilla.local/pause:1: catatonit in pause mode, as the sandbox's init."""
    catatonit = shutil.which("catatonit") or "/usr/bin/catatonit"
    out = images_dir(root) / "pause.tar"
    if out.exists():
        return out
    with tempfile.TemporaryDirectory() as tmp:
        rootfs = Path(tmp) / "rootfs"
        for d in ("bin", "dev", "proc", "sys", "etc"):
            (rootfs / d).mkdir(parents=True)
        shutil.copy2(catatonit, rootfs / "bin" / "pause")
        layer = oci.layer_from_dir(rootfs, Path(tmp) / "layer.tar.gz")
        oci.write_image(PAUSE_IMAGE, [layer], oci.ImageConfig(entrypoint=["/bin/pause", "-P"], user="65535:65535"), out)
    return out


# --- the Dockerfile's base ----------------------------------------------------------------------------

#: What debootstrap leaves that debian:bookworm-slim does not have: apt's caches and the host's files.
_NOT_IN_BASE = ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*",
                "etc/resolv.conf", "etc/hostname")


def debian_base(root: Path | None = None) -> tuple[str, Path]:
    """flotilla.local/debian:bookworm-<key>: the stand-in for debian:bookworm-slim (about 2 min the
    first time, from the Debian mirror); returns its name and OCI tarball."""
    key = _key(SUITE, MIRROR, "minbase", *_NOT_IN_BASE)
    name = f"{DEBIAN_IMAGE}:{SUITE}-{key[:12]}"
    out = images_dir(root) / f"debian-{SUITE}-{key}.tar"
    if out.exists():
        return name, out
    out.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    log(f"debootstrap --variant=minbase {SUITE} (the Dockerfile's Debian base) ...")
    with tempfile.TemporaryDirectory(dir=out.parent, prefix="debian-build-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        _run(["debootstrap", "--variant=minbase", SUITE, str(rootfs), MIRROR])
        for pattern in _NOT_IN_BASE:
            for p in rootfs.glob(pattern):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
        layer = oci.layer_from_dir(rootfs, Path(tmp) / "layer.tar.gz")
        oci.write_image(name, [layer], oci.ImageConfig(entrypoint=[], cmd=["bash"]), out)
    log(f"Debian base image built in {time.monotonic() - started:.0f}s")
    return name, out
