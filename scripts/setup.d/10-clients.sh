#!/usr/bin/env bash
# Test clients the interop suite drives as child processes: kcat (Debian package) and the Java
# client in tests/java/client-check (Maven, cached under ~/.cache/flotilla/java/ by a hash of its
# pom and sources). Idempotent: a second run only checks. Apache Kafka jars for
# `pytest --kafka-target=apache` are fetched on first use, not here.
set -euo pipefail
cd "$(dirname "$0")/../.."

if command -v kcat >/dev/null 2>&1; then
  echo "kcat: $(command -v kcat) (already installed)"
else
  echo "kcat: installing the Debian package"
  if [ "$(id -u)" -ne 0 ]; then
    echo "kcat: not root; install it with: sudo apt-get install -y kcat" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq kcat >/dev/null
  echo "kcat: $(kcat -V 2>&1 | head -1)"
fi

for tool in java javac mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "java client: $tool is missing (needs a JDK 17+ and Maven)" >&2
    exit 1
  fi
done
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
dir=$("$PY" -m tests.support.java_client path)
if [ -f "$dir/.complete" ]; then
  echo "java client: $dir (cached)"
else
  echo "java client: building tests/java/client-check with Maven (first run downloads kafka-clients)"
  "$PY" -m tests.support.java_client build
fi
