#!/usr/bin/env bash
# promtool, which checks the shipped Prometheus rules (monitoring/prometheus-rules.yaml,
# tests/unit/test_monitoring_rules.py), compiled from its Go module into the test control plane's
# cache (~/.cache/flotilla/testenv/<kubernetes version>/bin). Seconds when cached; the first build
# downloads and compiles Prometheus' dependencies: 19 min on two busy cores (11 min of CPU, 3.3 GB
# of memory at its peak). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
  export PATH="/usr/local/go/bin:$PATH"
fi

.venv/bin/python -m flotilla.monitoring.promtool build
