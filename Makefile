# gpu-execution-pack. `make` sets up the venv, generates rules, dashboards and docs with the
# built-in defaults and validates them; `make test` runs the test suite. CONFIG=path uses your config.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(PY) -m gpu_execution_pack
CONFIG ?=
CONFIG_ARG := $(if $(CONFIG),--config $(CONFIG),)

.PHONY: all venv promtool rules dashboards docs check lint test test-fast bench bench-api bench-host-map bench-report clean
.DEFAULT_GOAL := all

all: rules dashboards docs check

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

# promtool and the server (for the end-to-end tests) come from Debian's prometheus package, the
# Alertmanager and amtool (for the delivery test) from prometheus-alertmanager;
# install it where we may.
promtool:
	@{ command -v promtool && command -v prometheus && command -v prometheus-alertmanager && command -v amtool; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus prometheus-alertmanager >/dev/null; \
	  else \
	    echo "promtool, prometheus, prometheus-alertmanager or amtool is missing: run 'sudo apt-get install prometheus prometheus-alertmanager'" >&2; exit 1; \
	  fi; }

rules: venv
	$(CLI) generate $(CONFIG_ARG)

dashboards: venv
	$(CLI) dashboards $(CONFIG_ARG)

docs: venv
	$(CLI) docs

lint: venv
	$(VENV)/bin/ruff check generator tests bench harness
	$(VENV)/bin/ruff format --check generator tests bench harness

check: venv promtool lint
	$(CLI) check $(CONFIG_ARG)

# Everything, on every core: each test file runs whole on one worker (--dist loadfile), so a module's
# Prometheus is started once.
test: venv promtool
	$(VENV)/bin/pytest -n auto --dist loadfile

# The fast tier, while you work: no Prometheus, Alertmanager, server, wheel build or large promtool suite.
test-fast: venv
	$(VENV)/bin/pytest -m "not e2e"

$(VENV)/.bench-installed: $(VENV)/.installed
	$(VENV)/bin/pip install --quiet -e '.[bench]'
	touch $@

# Not part of `make test`: measures (about 16 minutes), and rewrites docs/benchmarks.md, its plot and
# docs/benchmarks.json (the figures; `$(PY) -m bench.run --render` rewrites the report from them).
bench: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.run

# About 9 minutes: the served rule groups before the host map against today's, in one run
# (bench/host_map_ab.py); adds its figures to docs/benchmarks.json and rewrites the report.
bench-host-map: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.host_map_ab

# The metrics endpoint beside bare Prometheus (about 5 minutes); its figures replace the endpoint's in
# docs/benchmarks.json, and docs/benchmarks.md is rewritten.
bench-api: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.api

# The execution report's fleet view over 1,000 executions (about a minute); writes docs/benchmarks-report.md.
bench-report: venv promtool
	$(PY) -m bench.report

clean:
	rm -rf $(VENV) .pytest_cache build
