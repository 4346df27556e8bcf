#!/usr/bin/env bash
# Build (or reuse) the Kubernetes test control plane: kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, etcd, kwok and helm, compiled from the Go module proxy into
# ~/.cache/flotilla/testenv/<kubernetes version>/bin. Seconds when cached; the first build on a
# fresh machine takes a while (see docs/testenv.md). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi


.venv/bin/flotilla testenv build
