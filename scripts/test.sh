#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run every test.
# Slow pieces (Kubernetes binaries, the Java client) are cached under ~/.cache/flotilla.
# The modules run on FLOTILLA_TEST_WORKERS pytest-xdist workers (tests/support/parallel.py): most
# e2e time is spent waiting for brokers, elections and the API server, not computing, so a few
# more workers than cores shortens the run. FLOTILLA_TEST_WORKERS=0 runs everything in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  echo "==> $(basename "$part")"
  bash "$part"
done
workers=${FLOTILLA_TEST_WORKERS:-3}
if [ "$workers" = 0 ]; then
  exec .venv/bin/pytest tests -ra --durations=25 "$@"
fi
echo "==> pytest on $workers workers (FLOTILLA_TEST_WORKERS; module times land in tests/.work/module-durations.json)"
exec .venv/bin/pytest tests -ra --durations=25 -n "$workers" --dist loadgroup --no-loadscope-reorder "$@"
