# Two commands a newcomer needs:
#   make broker   set up a virtualenv and start one local broker (127.0.0.1:9092)
#   make test     set up everything the tests need and run every test
.PHONY: setup broker test unit e2e bench clean

setup:
	bash scripts/setup.sh

broker: setup
	.venv/bin/flotilla broker

test:
	bash scripts/test.sh

unit: setup
	.venv/bin/pytest tests/unit -q

bench: setup
	.venv/bin/python -m bench

clean:
	rm -rf .venv data tests/.work bench/.work
