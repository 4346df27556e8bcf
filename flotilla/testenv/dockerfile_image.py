"""The Flotilla image built from the repository's Dockerfile by buildah, for the real test node.

Why buildah: it is daemonless (no Docker engine, which this machine does not have), a Debian
package (`apt-get install buildah`), reads the Dockerfile as it is (multi-stage, `ARG` before
`FROM`) and writes OCI archives that containerd imports. As root it runs here with the overlay
storage driver and runc isolation.

What differs from `docker build` on a developer's machine, and why:
- The base: Docker Hub cannot be reached, so `--build-arg DEBIAN_IMAGE=` names the local Debian
  base from images.debian_base (debootstrap), imported into buildah's storage; `--pull=never`.
- `--network host`: RUN steps reach the Debian mirror and PyPI without a bridge or NAT of buildah's.
- The host's CA bundle and a pip.conf naming it are bind-mounted into the build stage, so pip
  trusts whatever TLS proxy the host's pip trusts. Bind mounts leave their (empty) mount points in
  the layer of every RUN step they were mounted for, so the runtime stage is built first without
  them (`--target runtime`); the full build then takes it from the layer cache and mounts them only
  for the build stage, whose /opt/flotilla alone reaches the image. `_check_clean` verifies it.

Storage (layers, the cached stages) lives in ~/.cache/flotilla/testenv/buildah; the image is
exported as an OCI archive named flotilla.local/flotilla:<key>, where the key covers the Dockerfile,
.dockerignore, every file of the build context and the base, so an unchanged tree costs a hash
(about a second) and a source change rebuilds from the project's own install step on.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

from . import images

IMAGE = "flotilla.local/flotilla"
STORAGE_DRIVER = "overlay"
#: Files a build may leave in a layer through a bind mount; none may be in the final image.
_BUILD_MOUNTS = ("/etc/pip.conf", "/run/flotilla-build")
STALE_SECONDS = 3600


class ImageBuildError(RuntimeError):
    pass


# --- the build context and its key ------------------------------------------------------------------


def _dockerignore_patterns(context: Path) -> list[tuple[bool, re.Pattern]]:
    """.dockerignore's lines as (re-included?, regex), in order: the last matching line decides."""
    path = context / ".dockerignore"
    out = []
    for line in (path.read_text().splitlines() if path.exists() else []):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        negate = line.startswith("!")
        pattern = line.lstrip("!").strip("/")
        regex = ""
        for part in re.split(r"(\*\*/|\*|\?)", pattern):
            regex += {"**/": "(?:.*/)?", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part))
        out.append((negate, re.compile(regex + r"\Z")))
    return out


def _ignored(rel: str, patterns: list[tuple[bool, re.Pattern]]) -> bool:
    """Docker's rule: a path is excluded when the last pattern matching it, or one of its parent
    directories, is an exclusion."""
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    ignored = False
    for negate, regex in patterns:
        if any(regex.match(p) for p in prefixes):
            ignored = not negate
    return ignored


def context_files(context: Path) -> list[str]:
    """The files `COPY` can see: the build context less what .dockerignore excludes."""
    patterns = _dockerignore_patterns(context)
    reincluded = [r.pattern for negate, r in patterns if negate]

    def may_hold_included(rel: str) -> bool:
        """Could a `!pattern` re-include something at or below the excluded directory rel?"""
        return any(p.startswith(("(?:", "[^/]")) or p.startswith(re.escape(rel)) for p in reincluded)

    files = []
    for dirpath, dirnames, filenames in os.walk(context):
        rel_dir = os.path.relpath(dirpath, context)
        rel_dir = "" if rel_dir == "." else rel_dir + "/"
        # Skip excluded directories nothing re-includes (.git, .venv, tests, ...).
        dirnames[:] = sorted(d for d in dirnames
                             if not _ignored(rel_dir + d, patterns) or may_hold_included(rel_dir + d))
        files += [rel_dir + f for f in sorted(filenames) if not _ignored(rel_dir + f, patterns)]
    return files


def image_key(context: Path, base: str) -> str:
    """What the image is made of: the Dockerfile, .dockerignore, the context's files and the base."""
    digest = hashlib.sha256(base.encode() + b"\0")
    for rel in ["Dockerfile", ".dockerignore", *context_files(context)]:
        path = context / rel
        if path.is_file():
            digest.update(rel.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


# --- buildah -----------------------------------------------------------------------------------------


def storage_dir(root: Path | None = None) -> Path:
    return images.images_dir(root).parent / "buildah"


def buildah(root: Path | None = None) -> list[str]:
    """buildah with the project's own storage (never the system's /var/lib/containers)."""
    return ["buildah", "--root", str(storage_dir(root) / "storage"), "--runroot", str(storage_dir(root) / "run"),
            "--storage-driver", STORAGE_DRIVER]


def bud_argv(root: Path | None, base: str, context: Path, *, tag: str | None, mounts: list[str]) -> list[str]:
    """`buildah bud` for the Dockerfile: the local base, no pulls, the host's network, cached layers;
    with tag None only the runtime stage."""
    argv = [*buildah(root), "bud", "--layers", "--pull=never", "--network", "host", "--force-rm",
            "--build-arg", f"DEBIAN_IMAGE={base}"]
    for m in mounts:
        argv += ["--volume", m]
    argv += ["--tag", tag] if tag else ["--target", "runtime"]
    return [*argv, "--file", str(context / "Dockerfile"), str(context)]


def _image_names(root: Path | None) -> list[str]:
    return images._run([*buildah(root), "images", "--format", "{{.Name}}:{{.Tag}}", "--noheading"],
                       timeout=120).stdout.split()


def _build_mounts(work: Path) -> list[str]:
    """The host's CA bundle and a pip.conf naming it (see the module docstring)."""
    bundle = next((Path(p) for p in (os.environ.get("PIP_CERT"), os.environ.get("SSL_CERT_FILE"),
                                     "/etc/ssl/certs/ca-certificates.crt") if p and Path(p).is_file()), None)
    if bundle is None:
        return []
    conf = work / "pip.conf"
    conf.write_text("[global]\ncert = /run/flotilla-build/ca-certificates.crt\n")
    return [f"{bundle}:/run/flotilla-build/ca-certificates.crt:ro", f"{conf}:/etc/pip.conf:ro"]


def _check_clean(root: Path | None, name: str) -> None:
    """The build's bind mounts left nothing in the image (they would, were the runtime stage built
    with them)."""
    container = images._run([*buildah(root), "from", "--pull=never", "--quiet", name], timeout=300).stdout.strip()
    try:
        mnt = Path(images._run([*buildah(root), "mount", container], timeout=120).stdout.strip())
        left = [p for p in _BUILD_MOUNTS if os.path.lexists(mnt / p.lstrip("/"))]
        images._run([*buildah(root), "umount", container], timeout=120)
    finally:
        images._run([*buildah(root), "rm", container], timeout=120)
    if left:
        raise ImageBuildError(f"{name} contains {', '.join(left)}, mount points of the build's bind mounts: "
                              "the runtime stage was built with them (its layer cache missed?)")


def name_for_containerd(layout: Path, name: str) -> None:
    """Name the image in an OCI layout's index the way `ctr images import` reads it."""
    index_path = layout / "index.json"
    index = json.loads(index_path.read_text())
    for m in index["manifests"]:
        m.setdefault("annotations", {}).update({"io.containerd.image.name": name,
                                                "org.opencontainers.image.ref.name": name})
    index_path.write_text(json.dumps(index))


def _export(root: Path | None, name: str, out: Path) -> None:
    with tempfile.TemporaryDirectory(dir=out.parent, prefix="dockerfile-export-") as tmp:
        layout = Path(tmp) / "layout"
        images._run([*buildah(root), "push", "--quiet", name, f"oci:{layout}:{name}"], timeout=1800)
        name_for_containerd(layout, name)
        partial = Path(tmp) / "image.tar"
        with tarfile.open(partial, "w") as tar:
            for entry in sorted(layout.iterdir()):
                tar.add(str(entry), entry.name)
        os.replace(partial, out)


@contextmanager
def _locked(root: Path | None):
    """One build at a time per cache (two test sessions may ask at once)."""
    path = images.images_dir(root) / "dockerfile.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def build(root: Path | None = None, context: Path = images.PROJECT_ROOT,
          base_image: str | None = None) -> tuple[str, Path]:
    """Build (or reuse) the Flotilla image from context/Dockerfile; returns its name and OCI archive.
    The base is the local debootstrap one, or `base_image` (a registry reference, pulled once)."""
    if not shutil.which("buildah"):
        raise ImageBuildError("buildah not found: apt-get install buildah (scripts/setup.d/45-image.sh does)")
    with _locked(root):
        if base_image is None:
            base, base_tar = images.debian_base(root)
            base_source = f"oci-archive:{base_tar}"
        else:
            base, base_source = base_image, with_transport(base_image)
        key = image_key(context, base)
        name = f"{IMAGE}:{key}"
        out = images.images_dir(root) / f"dockerfile-{key}.tar"
        if out.exists():
            return name, out
        started = time.monotonic()
        if base not in _image_names(root):
            images._run([*buildah(root), "pull", "--quiet", base_source], timeout=900)
        images.log("buildah bud: the Dockerfile's runtime stage ...")
        images._run(bud_argv(root, base, context, tag=None, mounts=[]), timeout=3600)
        images.log("buildah bud: the build stage and the image ...")
        with tempfile.TemporaryDirectory() as tmp:
            images._run(bud_argv(root, base, context, tag=name, mounts=_build_mounts(Path(tmp))), timeout=3600)
        _check_clean(root, name)
        _export(root, name, out)
        _prune(root, keep=name)
        images.log(f"image {name} built from the Dockerfile in {time.monotonic() - started:.0f}s")
    return name, out


# --- pushing it where users pull from ---------------------------------------------------------------

#: buildah's transports; a destination without one is a registry reference (docker://).
TRANSPORTS = ("docker://", "oci:", "oci-archive:", "dir:", "docker-archive:", "containers-storage:")


def with_transport(reference: str) -> str:
    """`registry.example.com/flotilla:1.0` -> `docker://registry.example.com/flotilla:1.0`; a
    reference that names its transport (`oci:/tmp/layout:flotilla:1.0`) is kept as it is."""
    return reference if reference.startswith(TRANSPORTS) else f"docker://{reference}"


def push_argv(root: Path | None, name: str, destination: str, *, tls_verify: bool = True,
              authfile: str | None = None) -> list[str]:
    """`buildah push` of the built image to `destination`. Credentials come from `buildah login`
    (or --authfile); --tls-verify=false is for a registry on plain HTTP (a local one)."""
    argv = [*buildah(root), "push", "--quiet"]
    if destination.startswith("docker://"):
        argv.append(f"--tls-verify={'true' if tls_verify else 'false'}")
        if authfile:
            argv += ["--authfile", authfile]
    return [*argv, name, destination]


def push(name: str, destination: str, root: Path | None = None, *, tls_verify: bool = True,
         authfile: str | None = None) -> str:
    """Push the built image; returns the destination with its transport."""
    destination = with_transport(destination)
    images._run(push_argv(root, name, destination, tls_verify=tls_verify, authfile=authfile), timeout=1800)
    return destination


def _prune(root: Path | None, keep: str) -> None:
    """Drop older images from the storage (their layers hold a whole venv) and archives of older
    sources once they are an hour old (a session may still be importing one). The cached stages
    stay: they make the next build fast."""
    old = [n for n in _image_names(root) if n.startswith(f"{IMAGE}:") and n != keep]
    if old:
        images._run([*buildah(root), "rmi", *old], timeout=600)
    now = time.time()
    keep_file = f"dockerfile-{keep.rsplit(':', 1)[1]}.tar"
    for path in images.images_dir(root).iterdir():
        if path.name.startswith("dockerfile-") and path.suffix == ".tar" and path.name != keep_file \
                and path.stat().st_mtime < now - STALE_SECONDS:
            path.unlink(missing_ok=True)


def main() -> int:
    """`python -m flotilla.testenv.dockerfile_image`: build and print `<name> <archive>`."""
    try:
        name, out = build()
    except (ImageBuildError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"dockerfile image: {exc}", file=sys.stderr)
        return 1
    print(f"{name} {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
