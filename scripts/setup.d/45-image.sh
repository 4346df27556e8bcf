#!/usr/bin/env bash
# The Flotilla image for the real test node, built from the repository's Dockerfile by buildah (no
# Docker engine) on a local Debian base made with debootstrap (`flotilla testenv image`,
# flotilla/testenv/dockerfile_image.py). Cached under ~/.cache/flotilla/testenv (buildah's storage
# and the image archive, keyed by the Dockerfile and the build context): seconds when nothing
# changed, about a minute after a source change, several minutes the first time (docs/testenv.md).
# Needs root; idempotent.
# setup: background (downloads from the Debian mirror and PyPI; scripts/test.sh runs it beside the Go builds)
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" -ne 0 ]; then
  echo "flotilla image: not root; skipped (the real-node tests are skipped too)" >&2
  exit 0
fi
# shellcheck source=scripts/lib/debian.sh
. scripts/lib/debian.sh
# docker-registry: the local registry tests/e2e/test_image_push.py pushes to (it runs its own on a
# free port; the package's service is not used).
ensure_debian_packages "flotilla image" buildah runc debootstrap docker-registry
start=$(date +%s)
echo "flotilla image: $(.venv/bin/flotilla testenv image) ($(( $(date +%s) - start ))s)"
