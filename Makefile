# Two commands a newcomer needs:
#   make broker   set up a virtualenv and start one local broker (127.0.0.1:9092)
#   make test     set up everything the tests need and run every test
.PHONY: setup broker test unit interop-apache bench bench-omb bench-security bench-drain pipeline chaos clean

setup:
	bash scripts/setup.sh

broker: setup
	.venv/bin/flotilla broker

test:
	bash scripts/test.sh

unit: setup
	.venv/bin/pytest tests/unit -q

# The client interop, durability and bad-input suites against a real Apache Kafka 4.1 (jars from
# Maven Central, cached): checks that the tests themselves expect what Kafka does.
interop-apache:
	bash scripts/interop-apache.sh

bench: setup
	.venv/bin/python -m bench

# Three brokers each side: the OMB-shaped load, transactions and a kill -9 failover (bench/README.md).
bench-omb: setup
	.venv/bin/python -m bench omb

# One broker each side: throughput over SASL_SSL/SCRAM with ACLs vs PLAINTEXT (bench/README.md).
bench-security: setup
	.venv/bin/python -m bench security

# Three brokers each side: drain one holding 2 GiB, without and with a replication throttle (bench/README.md).
bench-drain: setup
	.venv/bin/python -m bench drain

# The PySpark pipeline against `make broker` (docs/pipeline.md): installs PySpark and the Kafka
# connector (cached), writes 20 000 events (about 2 % malformed), then streams until Ctrl-C.
BOOTSTRAP ?= 127.0.0.1:9092
pipeline: setup
	bash scripts/setup.d/30-pipeline.sh
	.venv/bin/python -m pipeline generate --bootstrap $(BOOTSTRAP) --count 20000 --malformed-every 50
	.venv/bin/python -m pipeline run --bootstrap $(BOOTSTRAP)

# The partition campaign (issue 35): CHAOS_ROUNDS rounds (at least ten: every kind, a skewed clock and a
# SIGSTOP past the Lease too) on three brokers; the report goes to bench/results/chaos.md. Root, iptables.
CHAOS_ROUNDS ?= 12
chaos: setup
	bash scripts/setup.d/20-testenv.sh
	bash -c '. scripts/lib/debian.sh && ensure_debian_packages "make chaos" iptables conntrack libfaketime'
	FLOTILLA_CHAOS_ROUNDS=$(CHAOS_ROUNDS) FLOTILLA_CHAOS_SEED=$(CHAOS_SEED) .venv/bin/pytest \
	  tests/e2e/test_partitions.py -k chaos_campaign -s

clean:
	rm -rf .venv data pipeline-checkpoint tests/.work bench/.work
