"""`flotilla testenv build|up|down`: build the binaries, start and stop a control plane.

`up` prints exactly one line on stdout, `export KUBECONFIG=<path>`, so `eval "$(flotilla testenv up)"`
works; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from . import build, versions

# control_plane (and with it `cryptography`) is imported only by `up` and `down`, so that
# `build` needs nothing beyond the standard library and Go.


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="testenv_command", metavar="ACTION", required=True)
    bp = sub.add_parser(
        "build",
        help="build (or reuse) the pinned binaries and print their directory",
        description=f"Build kube-apiserver, kube-controller-manager, kube-scheduler, kubectl "
        f"({versions.KUBERNETES_VERSION}), etcd ({versions.ETCD_VERSION}), kwok "
        f"({versions.KWOK_VERSION}) and helm ({versions.HELM_VERSION}) from the Go module proxy "
        f"into {versions.bin_dir()}; reuse what is there.",
    )
    bp.add_argument("--kubelet", action="store_true",
                    help="also build the real node: kubelet, kube-proxy, coredns and the pause image "
                    "(needs root)")
    sub.add_parser(
        "image",
        help="build (or reuse) the Flotilla image from the Dockerfile with buildah",
        description="Build the repository's Dockerfile with buildah (no Docker engine) on a local "
        "Debian base made with debootstrap, for the real node; print `<name> <OCI archive>`. "
        "Needs root, buildah and debootstrap (see docs/testenv.md).",
    )
    for name, help_text in (("up", "start a control plane in the background"),
                            ("down", "stop the control plane started in --dir")):
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.add_argument("--dir", type=Path, default=versions.default_run_dir(),
                        help="state directory: pids, ports, certs, logs (default: %(default)s)")
        if name == "up":
            sp.add_argument("--nodes", type=int, default=None,
                            help="fake kwok nodes to create (default: 2, or 0 with --kubelet)")
            sp.add_argument("--kubelet", action="store_true",
                            help="also run a real node (containerd, kubelet, kube-proxy, CoreDNS) on "
                            "which pods really run; needs root (see docs/testenv.md)")


class _Failed(Exception):
    pass


def run(args: argparse.Namespace) -> int:
    try:
        return {"build": _build, "image": _image, "up": _up, "down": _down}[args.testenv_command](args)
    except (build.BuildError, _Failed) as exc:
        print(f"flotilla testenv {args.testenv_command}: {exc}", file=sys.stderr)
        return 1


def _build(args: argparse.Namespace) -> int:
    bin_dir = build.ensure_built(node=args.kubelet)
    if args.kubelet:
        from . import images
        images.build_pause()
    print(bin_dir)
    return 0


def _image(args: argparse.Namespace) -> int:
    from . import dockerfile_image

    try:
        name, tar = dockerfile_image.build()
    except (dockerfile_image.ImageBuildError, RuntimeError, subprocess.TimeoutExpired) as exc:
        raise _Failed(str(exc)) from exc
    print(f"{name} {tar}")
    return 0


def _up(args: argparse.Namespace) -> int:
    from .control_plane import ControlPlaneError

    try:
        return _start(args)
    except ControlPlaneError as exc:
        raise _Failed(str(exc)) from exc


def _start(args: argparse.Namespace) -> int:
    from .control_plane import ControlPlane, ControlPlaneError

    directory = args.dir.resolve()
    existing = ControlPlane.load(directory)
    if existing and existing.running():
        if len(existing.running()) == len(existing.records):
            print(f"[testenv] already running in {directory}", file=sys.stderr)
            print(f"export KUBECONFIG={existing.kubeconfig}")
            return 0
        print(f"[testenv] partly running in {directory}; restarting", file=sys.stderr)
        existing.down()
    bin_dir = versions.bin_dir()
    if missing := build.missing(bin_dir, node=args.kubelet):
        flag = " --kubelet" if args.kubelet else ""
        raise ControlPlaneError(
            f"missing binaries in {bin_dir}: {', '.join(missing)}; run `flotilla testenv build{flag}` first"
        )
    images_ = []
    if args.kubelet:
        from . import dockerfile_image, images
        try:
            name, tarball = dockerfile_image.build()
        except dockerfile_image.ImageBuildError as exc:
            raise ControlPlaneError(str(exc)) from exc
        images_ = [images.build_pause(), tarball]
        print(f"[testenv] the real node gets image {name} (use imagePullPolicy: Never)", file=sys.stderr)
    nodes = args.nodes if args.nodes is not None else (0 if args.kubelet else 2)
    cp = ControlPlane(directory=directory, bin_dir=bin_dir, node_count=nodes, kubelet=args.kubelet,
                      images=images_)
    kubeconfig = cp.up()
    print(f"export KUBECONFIG={kubeconfig}")
    return 0


def _down(args: argparse.Namespace) -> int:
    from .control_plane import ControlPlane, ControlPlaneError

    directory = args.dir.resolve()
    cp = ControlPlane.load(directory)
    if cp is None:
        print(f"[testenv] nothing recorded in {directory}", file=sys.stderr)
        return 0
    try:
        stopped = cp.down()
    except (ControlPlaneError, RuntimeError) as exc:
        raise _Failed(str(exc)) from exc
    print(f"[testenv] stopped {', '.join(stopped) or 'nothing (already stopped)'}", file=sys.stderr)
    return 0
