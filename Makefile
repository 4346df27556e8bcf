# Two commands a newcomer needs:
#   make broker   set up a virtualenv and start one local broker (127.0.0.1:9092)
#   make test     set up everything the tests need and run every test
.PHONY: setup broker test unit interop-apache bench clean

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
interop-apache: setup
	bash scripts/setup.d/10-clients.sh
	.venv/bin/pytest tests/e2e/test_interop_*.py tests/e2e/test_durability.py tests/e2e/test_bad_input.py --kafka-target=apache -q

bench: setup
	.venv/bin/python -m bench

clean:
	rm -rf .venv data tests/.work bench/.work
