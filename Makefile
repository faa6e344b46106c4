# The two commands a new user runs: `make run` and `make test`. Each sets up
# everything it needs first (scripts/setup.sh, idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup run test test-unit bench clean datasets default-bundle bench-classifier install uninstall

setup:
	@bash scripts/setup.sh

run: setup
	$(VENV)/bin/procsift run

test: setup
	$(PY) -m pytest -q tests

# A system install from a wheel: /opt/procsift (venv), /usr/local/bin/procsift, /etc/procsift/policy.toml,
# /etc/systemd/system/procsift.service. ROOT=/some/dir puts the whole layout under that folder.
install: setup
	ROOT="$(ROOT)" bash scripts/install.sh install $(WHEEL)

uninstall:
	ROOT="$(ROOT)" PURGE="$(PURGE)" bash scripts/install.sh uninstall

test-unit: setup
	$(PY) -m pytest -q -m "not kernel" tests

# Programs the benchmarks drive (nginx, wrk, gcc for the C workloads), installed when missing.
BENCH_APT := nginx-light wrk gcc

bench: setup
	EXTRA_APT_PACKAGES="$(BENCH_APT)" bash scripts/setup.sh
	$(PY) bench/collector_overhead.py

clean:
	rm -rf $(VENV) build dist *.egg-info

# Real programs the dataset recipes run (installed idempotently, only when missing).
DATASET_APT := nginx-light lighttpd apache2 gunicorn wrk tmux vim nano htop less man-db zstd xz-utils webfs pigz bzip2 lua5.4 ed mc w3m \
	curl make gcc nodejs sqlite3 bc procps btop nmon
BUNDLE_WINDOW ?= 2

# Re-record every dataset (needs root, ~60 min), then retrain the default bundle.
datasets: setup
	EXTRA_APT_PACKAGES="$(DATASET_APT)" bash scripts/setup.sh
	$(PY) -m procsift.datasets.recipes --out datasets/data
	$(MAKE) default-bundle

# Train the default bundle (shipped in the package) on the shipped data, with its report.
default-bundle: setup
	$(VENV)/bin/procsift train --model tree -w $(BUNDLE_WINDOW) datasets/data/*.parquet -o models/default
	$(VENV)/bin/procsift evaluate models/default datasets/data/*.parquet --report models/default/report

bench-classifier: setup
	$(PY) bench/classifier.py
