#!/usr/bin/env bash
# Set up everything the test suite needs on a fresh machine, then run every test.
# Slow pieces (Kubernetes binaries, the Java client) are cached under ~/.cache/flotilla.
# The modules run on FLOTILLA_TEST_WORKERS pytest-xdist workers (tests/support/parallel.py): most
# e2e time is spent waiting for brokers, elections and the API server, not computing, so a few
# more workers than cores shortens the run. FLOTILLA_TEST_WORKERS=0 runs everything in one process.
set -euo pipefail
cd "$(dirname "$0")/.."
setup_start=$(date +%s)
bash scripts/setup.sh
# Parts marked `# setup: background` (downloads, mostly) run one after another in the background
# while the others (Go builds, CPU-bound) run here; their output follows once they are done.
mkdir -p tests/.work
background=()
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  if grep -q '^# setup: background' "$part"; then background+=("$part"); fi
done
bg_log=tests/.work/setup-background.log
bg_pid=
if [ ${#background[@]} -gt 0 ]; then
  echo "==> in the background: ${background[*]##*/} (log: $bg_log)"
  ( for part in "${background[@]}"; do echo "==> $(basename "$part")"; bash "$part" || exit 1; done ) >"$bg_log" 2>&1 &
  bg_pid=$!
fi
for part in scripts/setup.d/*.sh; do
  [ -e "$part" ] || continue
  case " ${background[*]} " in *" $part "*) continue ;; esac
  echo "==> $(basename "$part")"
  bash "$part"
done
if [ -n "$bg_pid" ]; then
  bg_rc=0
  wait "$bg_pid" || bg_rc=$?
  cat "$bg_log"
  if [ "$bg_rc" != 0 ]; then echo "background set-up failed (exit $bg_rc): see above" >&2; exit "$bg_rc"; fi
fi
# .ci/run reports the set-up apart from pytest (the rest of this script's time).
echo $(( $(date +%s) - setup_start )) > tests/.work/make-test.setup-seconds
workers=${FLOTILLA_TEST_WORKERS:-3}
if [ "$workers" = 0 ]; then
  exec .venv/bin/pytest tests -ra --durations=25 "$@"
fi
echo "==> pytest on $workers workers (FLOTILLA_TEST_WORKERS; module times land in tests/.work/module-durations.json)"
exec .venv/bin/pytest tests -ra --durations=25 -n "$workers" --dist loadgroup --no-loadscope-reorder "$@"
