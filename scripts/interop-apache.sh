#!/usr/bin/env bash
# The Kafka-reference run: the suites where Apache Kafka has the behaviour, run against a real
# Apache Kafka 4.1 (jars from Maven Central, cached under ~/.cache/flotilla/apache-kafka) instead of
# Flotilla, so the tests are known to expect what Kafka does. Tests marked flotilla_only skip.
# Same parallel layout as scripts/test.sh (FLOTILLA_TEST_WORKERS, 0 = one process).
set -euo pipefail
cd "$(dirname "$0")/.."
setup_start=$(date +%s)
bash scripts/setup.sh
bash scripts/setup.d/10-clients.sh
bash scripts/setup.d/30-pipeline.sh  # PySpark and the Kafka connector (cached): test_pipeline.py
export PYTHONPATH="$PWD:$PWD/operator${PYTHONPATH:+:$PYTHONPATH}"
# Fetch the jars once here: the workers would otherwise race to download them.
echo "apache kafka: $(.venv/bin/python -c 'from flotilla.testenv.brokers.apache_kafka import ensure_kafka_libs; print(ensure_kafka_libs())')"
mkdir -p tests/.work  # .ci/run reports the set-up apart from pytest (the rest of this script's time)
echo $(( $(date +%s) - setup_start )) > tests/.work/interop-apache.setup-seconds
suites=(
  tests/e2e/test_interop_*.py
  tests/e2e/test_durability.py
  tests/e2e/test_bad_input.py
  tests/e2e/test_delete_records.py
  tests/e2e/test_record_deletion_client.py
  tests/e2e/test_delete_records_fleet.py
  tests/e2e/test_reassignment.py
  tests/e2e/test_admin_parity.py
  tests/e2e/test_manual_assignment.py
  tests/e2e/test_stray_logs.py
  tests/e2e/test_replication_throttle.py
  tests/e2e/test_fetch_from_follower.py
  tests/e2e/test_transactions_end_to_end.py
  tests/e2e/test_transactions_clients.py
  tests/e2e/test_transactions_system.py
  tests/e2e/test_security.py
  tests/e2e/test_security_clients.py
  tests/e2e/test_security_fuzz.py
  tests/e2e/test_acls.py
  tests/e2e/test_user_quotas.py
  tests/e2e/test_scram_credentials.py
  tests/e2e/test_reauthentication.py
  tests/e2e/test_compaction_transactions.py
  tests/e2e/test_admin_apis.py
  tests/e2e/test_broker_cleaner_configs.py
  tests/e2e/test_bench_smoke.py
  tests/e2e/test_pipeline.py
)
workers=${FLOTILLA_TEST_WORKERS:-3}
if [ "$workers" = 0 ]; then
  exec .venv/bin/pytest "${suites[@]}" --kafka-target=apache -ra --durations=15 "$@"
fi
echo "==> Apache Kafka reference run on $workers workers"
exec .venv/bin/pytest "${suites[@]}" --kafka-target=apache -ra --durations=15 -n "$workers" --dist loadgroup --no-loadscope-reorder "$@"
