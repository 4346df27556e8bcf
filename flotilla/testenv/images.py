"""The pause image and the Flotilla image, built without Docker, for the real test node.

The Flotilla image follows the Dockerfile's recipe step for step (tests/unit/test_images.py checks
that both install the same Debian packages, create the same user and directories and run the same
command): a Debian bookworm root filesystem from debootstrap with the runtime packages, a virtual
environment in /opt/flotilla holding the project's wheel and its dependencies, user 10001.

Three layers, each cached under ~/.cache/flotilla/testenv/images/ by what goes into it:
  base     debootstrap + packages + user and directories   keyed by the package list and suite
  deps     /opt/flotilla venv with every dependency wheel   keyed by those wheels' contents
  project  the project's own wheel installed into it         keyed by that wheel's contents
so a source change rebuilds only the project layer (seconds), never the base (about 2 min when
the Debian mirror is fast) or the dependencies. The pause image is Debian's static `catatonit -P`.

The root filesystem work needs root (debootstrap, chroot, an overlay mount).
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
#: Debian packages of the runtime image: keep equal to the Dockerfile's `apt-get install` list.
DEBIAN_PACKAGES = ("python3", "python3-venv", "ca-certificates")
UID = GID = 10001
VENV = "/opt/flotilla"
DATA_DIR = "/var/lib/flotilla/data"
CONFIG_DIR = "/etc/flotilla"
ENTRYPOINT = ["flotilla"]
CMD = ["broker", "--override", "listeners=PLAINTEXT://0.0.0.0:9092", "--override", "log.dirs=/var/lib/flotilla/data"]
ENV = [f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
       "PYTHONUNBUFFERED=1", "PYTHONDONTWRITEBYTECODE=1"]
EXPOSED = ["9092/tcp", "9404/tcp", "9405/tcp", "8080/tcp"]
PAUSE_IMAGE = "flotilla.local/pause:1"
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


def _layer_paths(directory: Path) -> tuple[Path, Path]:
    return directory / "layer.tar.gz", directory / "layer.json"


def _cached_layer(directory: Path) -> oci.Layer | None:
    tar, meta = _layer_paths(directory)
    if tar.exists() and meta.exists():
        import json
        m = json.loads(meta.read_text())
        return oci.Layer(tar, m["digest"], m["diff_id"], m["size"])
    return None


def _save_layer(directory: Path, layer: oci.Layer) -> oci.Layer:
    import json
    _layer_paths(directory)[1].write_text(json.dumps({"digest": layer.digest, "diff_id": layer.diff_id,
                                                     "size": layer.size}))
    return layer


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


# --- flotilla -----------------------------------------------------------------------------------------


def base_layer(root: Path | None = None) -> tuple[Path, oci.Layer]:
    """debootstrap + DEBIAN_PACKAGES + the flotilla user and directories; cached by its inputs."""
    directory = images_dir(root) / f"base-{_key(SUITE, MIRROR, *DEBIAN_PACKAGES, str(UID))}"
    rootfs = directory / "rootfs"
    cached = _cached_layer(directory)
    if cached and rootfs.is_dir():
        return rootfs, cached
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    started = time.monotonic()
    log(f"debootstrap {SUITE} with {', '.join(DEBIAN_PACKAGES)} ...")
    _run(["debootstrap", "--variant=minbase", f"--include={','.join(DEBIAN_PACKAGES)}", SUITE,
          str(rootfs), MIRROR])
    # The Dockerfile's user and directory step.
    _run(["chroot", str(rootfs), "groupadd", "--system", "--gid", str(GID), "flotilla"])
    _run(["chroot", str(rootfs), "useradd", "--system", "--uid", str(UID), "--gid", str(GID), "--no-create-home",
          "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin", "flotilla"])
    _run(["chroot", str(rootfs), "mkdir", "-p", DATA_DIR, CONFIG_DIR])
    _run(["chroot", str(rootfs), "chown", f"{UID}:{GID}", DATA_DIR])
    # What the image does not need: apt lists and the package cache (the slim image drops them too).
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for p in (rootfs / junk).glob("*"):
            if p.is_file():
                p.unlink()
    layer = _save_layer(directory, oci.layer_from_dir(rootfs, _layer_paths(directory)[0]))
    log(f"base layer built in {time.monotonic() - started:.0f}s")
    return rootfs, layer


def wheelhouse(out: Path, python: str = sys.executable) -> list[Path]:
    """The project's wheel and every dependency's, built/fetched by the host's pip (its cache)."""
    out.mkdir(parents=True, exist_ok=True)
    _run([python, "-m", "pip", "wheel", "--quiet", "-w", str(out), str(PROJECT_ROOT)])
    return sorted(out.glob("*.whl"))


def _wheel_content_hash(wheel: Path) -> bytes:
    """A wheel's files and their contents, not its zip timestamps (a rebuilt wheel of unchanged
    sources hashes the same, so the cached layer is reused)."""
    import zipfile
    h = hashlib.sha256()
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(z.namelist()):
            h.update(name.encode() + b"\0")
            h.update(hashlib.sha256(z.read(name)).digest())
    return h.digest()


def _install_layer(directory: Path, lowers: list[Path], wheels: list[Path], commands: list[list[str]]) -> oci.Layer:
    """Run `commands` in a chroot over lowers (top first) with the wheels in /tmp/wheels; the
    layer is what they wrote under /opt/flotilla, also kept in directory/tree for the next layer."""
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    upper, work, merged = directory / "upper", directory / "work", directory / "merged"
    for d in (upper, work, merged):
        d.mkdir()
    _run(["mount", "-t", "overlay", "overlay", "-o",
          f"lowerdir={':'.join(map(str, lowers))},upperdir={upper},workdir={work}", str(merged)])
    try:
        house = merged / "tmp" / "wheels"
        house.mkdir(parents=True)
        for w in wheels:
            shutil.copy2(w, house / w.name)
        for argv in commands:
            _run(["chroot", str(merged), *argv])
    finally:
        subprocess.run(["umount", str(merged)], check=False)
    # Only /opt/flotilla belongs in the layer (chroot'ed tools may have touched /root, /tmp, ...).
    tree = directory / "tree"
    (tree / "opt").mkdir(parents=True)
    (upper / VENV.lstrip("/")).rename(tree / VENV.lstrip("/"))
    layer = _save_layer(directory, oci.layer_from_dir(tree, _layer_paths(directory)[0]))
    for d in (upper, work, merged):
        shutil.rmtree(d, ignore_errors=True)
    return layer


def _wheels_key(wheels: list[Path]) -> str:
    digest = hashlib.sha256()
    for w in wheels:
        digest.update(w.name.encode())
        digest.update(_wheel_content_hash(w))
    return digest.hexdigest()[:16]


PIP_OFFLINE = [f"{VENV}/bin/pip", "install", "--quiet", "--no-index", "--no-deps", "--disable-pip-version-check"]


def deps_layer(base_rootfs: Path, deps: list[Path], root: Path | None = None) -> tuple[Path, oci.Layer]:
    """/opt/flotilla: a venv of the base image's python3 with every dependency (offline)."""
    directory = images_dir(root) / f"deps-{_wheels_key(deps)}-{base_rootfs.parent.name}"
    cached = _cached_layer(directory)
    if cached and (directory / "tree").is_dir():
        return directory / "tree", cached
    started = time.monotonic()
    layer = _install_layer(directory, [base_rootfs], deps, [
        ["python3", "-m", "venv", VENV],
        PIP_OFFLINE + [f"/tmp/wheels/{w.name}" for w in deps],
    ])
    log(f"dependencies layer built in {time.monotonic() - started:.0f}s")
    return directory / "tree", layer


def project_layer(base_rootfs: Path, deps_tree: Path, project: Path, root: Path | None = None) -> oci.Layer:
    """The project's own wheel on top of the dependencies: all a source change rebuilds."""
    directory = images_dir(root) / f"project-{_wheels_key([project])}-{deps_tree.parent.name}"
    cached = _cached_layer(directory)
    if cached:
        return cached
    started = time.monotonic()
    layer = _install_layer(directory, [deps_tree, base_rootfs], [project],
                           [PIP_OFFLINE + [f"/tmp/wheels/{project.name}"]])
    shutil.rmtree(directory / "tree", ignore_errors=True)
    log(f"project layer built in {time.monotonic() - started:.0f}s")
    return layer


def flotilla_image_name(app: oci.Layer) -> str:
    """Tagged by the app layer's digest, so a rebuilt wheel is a new image (no stale pod images)."""
    return f"flotilla.local/flotilla:{app.digest[7:19]}"


def build_flotilla(root: Path | None = None) -> tuple[str, Path]:
    """Build (or reuse) the Flotilla image; returns its name and OCI tarball."""
    rootfs, base = base_layer(root)
    with tempfile.TemporaryDirectory() as tmp:
        wheels = wheelhouse(Path(tmp))
        project = next(w for w in wheels if w.name.startswith("flotilla-"))
        deps_tree, deps = deps_layer(rootfs, [w for w in wheels if w != project], root)
        app = project_layer(rootfs, deps_tree, project, root)
    name = flotilla_image_name(app)
    out = images_dir(root) / f"flotilla-{app.digest[7:19]}.tar"
    if not out.exists():
        config = oci.ImageConfig(entrypoint=ENTRYPOINT, cmd=CMD, env=ENV, user=f"{UID}:{GID}",
                                 working_dir="/var/lib/flotilla", exposed_ports=EXPOSED,
                                 labels={"org.opencontainers.image.title": "flotilla"})
        oci.write_image(name, [base, deps, app], config, out)
    _prune(keep={out}, project_prefix="project-", root=root)
    return name, out


STALE_SECONDS = 3600


def _prune(keep: set[Path], project_prefix: str, root: Path | None) -> None:
    """Drop image tarballs and project layers of older sources (each image is ~130 MB), once they
    are an hour old, so that a session still importing one is left alone."""
    now = time.time()
    for path in images_dir(root).iterdir():
        stale = path.name.startswith(("flotilla-", project_prefix)) and path.stat().st_mtime < now - STALE_SECONDS
        if stale and not any(path == k or k.is_relative_to(path) for k in keep):
            if path.is_dir():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
