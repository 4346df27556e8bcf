#!/usr/bin/env bash
# Test clients the interop suite drives as child processes: kcat (Debian package) and the Java
# client in tests/java/client-check (Maven, cached under ~/.cache/flotilla/java/ by a hash of its
# pom and sources). Idempotent: a second run only checks. Apache Kafka jars for
# `pytest --kafka-target=apache` are fetched on first use, not here.
# setup: background (mostly downloads; scripts/test.sh runs it beside the Go builds)
set -euo pipefail
cd "$(dirname "$0")/../.."

apt_updated=
apt_install() {  # apt_install WHAT PACKAGE...
  local what=$1; shift
  if [ "$(id -u)" -ne 0 ]; then
    echo "$what: not root; install it with: sudo apt-get install -y $*" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  if [ -z "$apt_updated" ]; then
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt_updated=1
  fi
  echo "$what: apt-get install $*"
  apt-get -o DPkg::Lock::Timeout=600 install -y -qq "$@" >/dev/null
}

if command -v kcat >/dev/null 2>&1; then
  echo "kcat: $(command -v kcat) (already installed)"
else
  apt_install kcat kcat
  echo "kcat: $(kcat -V 2>&1 | head -1)"
fi

if command -v java >/dev/null 2>&1 && command -v javac >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1; then
  echo "java: $(java -version 2>&1 | head -1); $(mvn -v 2>/dev/null | head -1 | sed 's/\x1b\[[0-9;]*m//g')"
else
  apt_install "java client" openjdk-17-jdk-headless maven
fi
PY=.venv/bin/python
[ -x "$PY" ] || PY=python3
dir=$("$PY" -m tests.support.java_client path)
if [ -f "$dir/.complete" ]; then
  echo "java client: $dir (cached)"
else
  echo "java client: building tests/java/client-check with Maven (first run downloads kafka-clients)"
  "$PY" -m tests.support.java_client build
fi
# Kafka's VerifiableProducer/VerifiableConsumer (tests/e2e/test_replication.py), cached once.
echo "kafka tools: $("$PY" -m flotilla.testenv.brokers.kafka_tools fetch)"
