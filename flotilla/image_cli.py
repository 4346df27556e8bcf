"""`flotilla image build [--push REGISTRY/flotilla:TAG]`: the image users run, built without Docker.

The same build the tests run on every real-node session (flotilla/testenv/dockerfile_image.py):
buildah reads the repository's Dockerfile, keeps its layers in ~/.cache/flotilla/testenv/buildah
and writes an OCI archive; `--push` then hands the image to `buildah push`, to a registry or to any
destination buildah takes (`oci:DIR:TAG`, `oci-archive:FILE`, `dir:DIR`). The base is a Debian
made locally with debootstrap (from the Debian mirror, no Docker Hub), or `--base` names one to pull.
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="image_command", metavar="ACTION", required=True)
    bp = sub.add_parser(
        "build",
        help="build the Flotilla image from the Dockerfile with buildah and optionally push it",
        description="Build the repository's Dockerfile with buildah (no Docker engine; needs root "
        "or rootless buildah, and debootstrap for the default base); print `<name> <OCI archive>`; "
        "with --push, push the image there and print the destination.",
    )
    bp.add_argument("--push", metavar="DEST",
                    help="where to push: REGISTRY/REPOSITORY:TAG (log in first with `buildah login "
                    "REGISTRY`), or any buildah destination such as oci:DIR:TAG or oci-archive:FILE")
    bp.add_argument("--base", metavar="IMAGE", default=None,
                    help="Debian base to pull (e.g. docker.io/library/debian:bookworm-slim); default: "
                    "one made locally with debootstrap")
    bp.add_argument("--tls-verify", choices=("true", "false"), default="true",
                    help="verify the registry's TLS certificate (false: a plain-HTTP local registry)")
    bp.add_argument("--authfile", help="registry credentials file (default: buildah login's)")


def run(args: argparse.Namespace) -> int:
    from flotilla.testenv import dockerfile_image

    try:
        name, archive = dockerfile_image.build(base_image=args.base)
        print(f"{name} {archive}", flush=True)
        if args.push:
            dest = dockerfile_image.push(name, args.push, tls_verify=args.tls_verify == "true",
                                         authfile=args.authfile)
            print(f"pushed {dest}")
    except (dockerfile_image.ImageBuildError, RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"flotilla image build: {exc}", file=sys.stderr)
        return 1
    return 0
