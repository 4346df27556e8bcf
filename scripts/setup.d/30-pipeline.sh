#!/usr/bin/env bash
# The PySpark pipeline (pipeline/): PySpark from PyPI (the `pipeline` extra; pip caches the built
# wheel in ~/.cache/pip) and Spark's Kafka connector jars from Maven Central (cached in
# ~/.cache/flotilla/spark/<version>/). Needs Java and Maven (10-clients.sh installs them).
# Idempotent: a second run only checks.
# setup: background (mostly downloads; scripts/test.sh runs it beside the Go builds, after 10-clients.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=.venv/bin/python
want=$(sed -n 's/^SPARK_VERSION = "\([^"]*\)".*/\1/p' pipeline/spark_env.py)
if "$PY" -c "import sys, pyspark; sys.exit(pyspark.__version__ != '$want')" 2>/dev/null; then
  echo "pyspark: $want (installed)"
else
  echo "pyspark: installing $want (pip install -e '.[pipeline]')"
  .venv/bin/pip install -q -e '.[pipeline]'
fi
jars=$("$PY" -m pipeline jars)
echo "spark kafka connector: $(dirname "$(echo "$jars" | head -1)") ($(echo "$jars" | wc -l) jars)"
