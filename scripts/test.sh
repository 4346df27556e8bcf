#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run every test.
# Slow pieces (Kubernetes binaries, the Java client) are cached under ~/.cache/flotilla.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  echo "==> $(basename "$part")"
  bash "$part"
done
exec .venv/bin/pytest tests -ra "$@"
