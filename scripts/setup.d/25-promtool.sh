#!/usr/bin/env bash
# promtool, which checks the shipped Prometheus rules (monitoring/prometheus-rules.yaml,
# tests/unit/test_monitoring_rules.py): Debian's prometheus package, fetched with apt-get download
# and unpacked into ~/.cache/flotilla/promtool/ (not installed: no service). Seconds; idempotent.
# setup: background (a download; scripts/test.sh runs it beside the Go builds)
set -euo pipefail
cd "$(dirname "$0")/../.."
echo "promtool: $(.venv/bin/python -m flotilla.monitoring.promtool install)"
