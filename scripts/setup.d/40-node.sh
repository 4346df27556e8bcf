#!/usr/bin/env bash
# The real test node (`flotilla testenv up --kubelet`, docs/testenv.md): containerd, runc, CNI
# plugins, iptables and catatonit (the pause process) from Debian; kubelet, kube-proxy (the same
# Kubernetes module as the API server) and CoreDNS compiled from the Go module proxy; the pause image
# (Debian's catatonit). The Flotilla image is 45-image.sh's (the Dockerfile, built by buildah).
# Cached under ~/.cache/flotilla/testenv; the first run takes several minutes (see docs/testenv.md).
# Needs root; idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "$(id -u)" -ne 0 ]; then
  echo "real test node: not root; skipped (its tests are skipped too)" >&2
  exit 0
fi
# shellcheck source=scripts/lib/debian.sh
. scripts/lib/debian.sh
ensure_debian_packages "real test node" containerd runc containernetworking-plugins iptables conntrack catatonit
# The partition tests (tests/e2e/test_partitions.py): iptables above, and libfaketime to skew one broker's clock.
ensure_debian_packages "partition tests" libfaketime
# Debian's containerd package starts a system containerd where systemd runs; the test node runs
# its own (own socket and state), so a system one is left alone either way.

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi
.venv/bin/flotilla testenv build --kubelet
