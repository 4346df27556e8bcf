#!/usr/bin/env bash
# Run the e2e tests against a kind cluster instead of the built-in control plane.
# Needs: docker, kind, and the repo's venv (make setup). Not run in CI (CI has no Docker).
#
#   tests/kind/run-e2e.sh                  create the cluster, load flotilla:dev, run tests/e2e
#   tests/kind/run-e2e.sh -k control_plane extra arguments go to pytest
#   KEEP_CLUSTER=1 tests/kind/run-e2e.sh   leave the cluster running afterwards
set -euo pipefail
cd "$(dirname "$0")/../.."

CLUSTER="${KIND_CLUSTER_NAME:-flotilla-e2e}"
IMAGE="${FLOTILLA_IMAGE:-flotilla:dev}"
K8S_VERSION="$(.venv/bin/python -c 'from flotilla.testenv import versions; print(versions.KUBERNETES_VERSION)')"
NODE_IMAGE="${KIND_NODE_IMAGE:-kindest/node:${K8S_VERSION}}"
WORK="$(mktemp -d)"
KUBECONFIG_FILE="$WORK/kubeconfig"

for tool in docker kind; do
  command -v "$tool" >/dev/null 2>&1 || { echo "$tool not found on PATH: this script needs Docker and kind" >&2; exit 2; }
done

cleanup() {
  if [ -z "${KEEP_CLUSTER:-}" ]; then
    kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  else
    echo "cluster $CLUSTER kept; kubeconfig: $KUBECONFIG_FILE" >&2
  fi
}
trap cleanup EXIT

if ! kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  kind create cluster --name "$CLUSTER" --image "$NODE_IMAGE" \
    --config tests/kind/kind-config.yaml --kubeconfig "$KUBECONFIG_FILE" --wait 120s
else
  kind get kubeconfig --name "$CLUSTER" > "$KUBECONFIG_FILE"
fi

docker build -t "$IMAGE" .
kind load docker-image "$IMAGE" --name "$CLUSTER"

# The kube_env fixture uses this cluster instead of starting its own control plane; kubectl and
# helm come from the testenv cache when built, else from PATH.
export FLOTILLA_KUBECONFIG="$KUBECONFIG_FILE"
export FLOTILLA_IMAGE="$IMAGE"
.venv/bin/pytest -p flotilla.testenv.pytest_plugin tests/e2e -m kube -ra "$@"
