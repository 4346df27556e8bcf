#!/usr/bin/env bash
# Python side of the set-up: a virtualenv in .venv with Flotilla and its test clients.
# Idempotent and quick when nothing changed (pip's cache lives in ~/.cache/pip).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> creating virtualenv .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.flotilla-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "==> installing Flotilla and test dependencies into .venv"
  .venv/bin/pip install -q -U pip
  .venv/bin/pip install -q -e '.[test,bench]'
  touch "$stamp"
fi
