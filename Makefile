# The two commands a new user runs: `make run` and `make test`. Each sets up
# everything it needs first (scripts/setup.sh, idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup run test test-unit bench clean

setup:
	@bash scripts/setup.sh

run: setup
	$(VENV)/bin/procsift top

test: setup
	$(PY) -m pytest -q tests

test-unit: setup
	$(PY) -m pytest -q -m "not kernel" tests

bench: setup
	$(PY) bench/collector_overhead.py

clean:
	rm -rf $(VENV) build *.egg-info
