# gpu-execution-pack. `make` sets up the venv, generates rules, dashboards and docs with the
# built-in defaults and validates them; `make test` runs the test suite. CONFIG=path uses your config.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(PY) -m gpu_execution_pack
CONFIG ?=
CONFIG_ARG := $(if $(CONFIG),--config $(CONFIG),)

.PHONY: all venv demo promtool test-servers chromium screenshot prometheus3 rules dashboards docs golden check lint test test-fast bench bench-api bench-shapes bench-host-map bench-host-identity bench-rules bench-report bench-burst bench-archive clean
.DEFAULT_GOAL := all

all: rules dashboards docs check

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e '.[dev]'
	touch $@

venv: $(VENV)/.installed

# promtool (`make` validates the rules with it) and the server (`make demo`, the end-to-end tests) come from
# Debian's prometheus package; installed where we may (as root with apt-get), else named.
promtool:
	@{ command -v promtool && command -v prometheus; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null; \
	  else \
	    echo "promtool or prometheus is missing: run 'sudo apt-get install prometheus'" >&2; exit 1; \
	  fi; }

# What only `make test` starts besides Prometheus: the Alertmanager and amtool (the delivery test) from
# prometheus-alertmanager, vmalert (the rules on VictoriaMetrics) from victoria-metrics, initdb and pg_ctl (the
# archive's PostgreSQL tests) from postgresql; installed where we may, as Prometheus is.
test-servers:
	@{ command -v prometheus-alertmanager && command -v amtool && command -v vmalert \
	  && { [ -n "$$POSTGRES_BIN" ] || command -v initdb || ls /usr/lib/postgresql/*/bin/initdb; }; } >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus-alertmanager victoria-metrics postgresql >/dev/null; \
	  else \
	    echo "the tests' servers are missing: run 'sudo apt-get install prometheus-alertmanager victoria-metrics postgresql'" >&2; exit 1; \
	  fi; }

# Debian's chromium: the end-to-end tests open the report's HTML pages in it, headless, and `make screenshot`
# takes docs/report.png with it; installed where we may, as Prometheus is.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
	  else \
	    echo "chromium is missing: run 'sudo apt-get install chromium'" >&2; exit 1; \
	  fi; }

# docs/report.png (the README's picture): the demo's training job, placed as the demo places it, backfilled into
# a Prometheus on 127.0.0.1, its page written by `report ID --html`, photographed by headless Chromium.
screenshot: venv promtool chromium
	$(PY) -m tests.screenshot docs/report.png

rules: venv
	$(CLI) generate $(CONFIG_ARG)

dashboards: venv
	$(CLI) dashboards $(CONFIG_ARG)

docs: venv
	$(CLI) docs $(CONFIG_ARG)

# The golden files the tests compare with, from the current code: tests/golden/nvidia-rules (the rule files
# with the vendors pinned to NVIDIA). tests/golden/api-default is not rewritten: it holds the endpoint's
# default answer as an old commit wrote it, and tests/test_api_series.py compares answers on its series only.
golden: venv
	$(CLI) generate --config tests/golden/nvidia-rules.yml

lint: venv
	$(VENV)/bin/ruff check generator tests bench harness
	$(VENV)/bin/ruff format --check generator tests bench harness

check: venv promtool lint
	$(CLI) check $(CONFIG_ARG)

# A day of a small fleet in a Prometheus on 127.0.0.1, live exporters and the endpoint, until Ctrl-C.
demo: venv promtool
	$(CLI) demo

# Prometheus 3 beside the system's 2.x: Debian unstable's prometheus and promtool packages (they need
# only libc6), fetched with a private apt configuration and unpacked into $(PROMETHEUS3_DIR); nothing
# is installed. Or point PROMETHEUS3_DIR at a folder holding usr/bin/prometheus and usr/bin/promtool 3.x.
PROMETHEUS3_DIR ?= build/prometheus3
PROMETHEUS3_SUITE ?= unstable
PROMETHEUS3_BIN := $(abspath $(PROMETHEUS3_DIR))/usr/bin
APT3 := $(abspath build/apt3)
APT3_OPTS = -o Dir::Etc::sourcelist=$(APT3)/sources.list -o Dir::Etc::sourceparts=/dev/null \
  -o Dir::State::lists=$(APT3)/lists -o Dir::Cache::archives=$(APT3)/archives -o Dir::State::status=/dev/null \
  -o APT::Sandbox::User=root

prometheus3: $(PROMETHEUS3_BIN)/prometheus

$(PROMETHEUS3_BIN)/prometheus:
	@command -v apt-get >/dev/null 2>&1 || { echo "Prometheus 3 is fetched from Debian's $(PROMETHEUS3_SUITE) suite with apt-get; elsewhere set PROMETHEUS3_DIR to a folder with usr/bin/prometheus and usr/bin/promtool 3.x" >&2; exit 1; }
	rm -rf $(APT3) && mkdir -p $(APT3)/lists/partial $(APT3)/archives/partial $(PROMETHEUS3_DIR)
	echo "deb http://deb.debian.org/debian $(PROMETHEUS3_SUITE) main" > $(APT3)/sources.list
	apt-get $(APT3_OPTS) -qq update
	cd $(APT3) && apt-get $(APT3_OPTS) -qq download prometheus promtool
	for deb in $(APT3)/*.deb; do dpkg-deb -x $$deb $(PROMETHEUS3_DIR); done
	$(PROMETHEUS3_BIN)/prometheus --version | head -1

# Everything, on every core and one worker more (each test file runs whole on one worker, --dist loadfile, so a
# module's Prometheus is started once; the extra worker keeps the cores busy while another waits on a server:
# Alertmanager's group wait, a live scrape, a shard's remote write), with the system's Prometheus 2.x; then the
# end-to-end tests whose answer can change with the version again with Prometheus 3 (its promtool and server
# first on PATH; conftest.py checks they are 3.x): all but those marked single_version (see pyproject.toml).
# --no-loadscope-reorder: the files go out in conftest.py's order, the slowest first; pytest-xdist would hand
# out those with the most tests first, and the slow ones with few tests ended each phase on one busy core.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))
test: venv promtool test-servers chromium prometheus3
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=25
	PATH=$(PROMETHEUS3_BIN):$$PATH GPU_PACK_EXPECT_PROMETHEUS=3 $(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder -m "e2e and not single_version" --durations=25

# The fast tier, while you work: no Prometheus, Alertmanager, server, wheel build or large promtool suite.
test-fast: venv
	$(VENV)/bin/pytest -m "not e2e"

$(VENV)/.bench-installed: $(VENV)/.installed
	$(VENV)/bin/pip install --quiet -e '.[bench]'
	touch $@

# Not part of `make test`: measures (under an hour on 2 cores: `make rules dashboards` timed, about a minute; the
# endpoint, 5 minutes; the two fleet shapes, about 15 minutes each; the fleet at 1,000 and 10,000 GPUs with the last
# hour's fetch, about 20 minutes), saving each part's figures as it ends, and rewrites docs/benchmarks.md, its plot and
# docs/benchmarks.json (the figures; `$(PY) -m bench.run --render` rewrites the report from them).
# BENCH_SMALL=1 make bench: the same on a tiny fleet with short phases (about 20 minutes, a third of it the endpoint's
# fixed part), its figures and report in build/bench-small: every code path, no figure to keep.
bench: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.run

# About 30 minutes: issue 39's two fleet shapes (hosts of 128 CPUs x 8 modes; of 32 CPUs x 2 modes with the profiling
# fields), the served groups of the built-in defaults and of the config the real doctor writes against the floor
# (bench/shapes.py, part of `make bench`); adds its figures to docs/benchmarks.json and rewrites the report.
bench-shapes: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.shapes

# About 10 minutes, not part of `make bench`: each per-GPU rule's expression (the built-in defaults now and at the
# commit before their last rewrite, and doctor's config) against a bare selector, as instant queries on a live fleet
# of 10,000 GPUs (bench/rule_costs.py); adds its figures to docs/benchmarks.json and rewrites the report.
bench-rules: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.rule_costs

# About 9 minutes: the served rule groups before the host map against today's, in one run
# (bench/host_map_ab.py); adds its figures to docs/benchmarks.json and rewrites the report.
bench-host-map: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.host_map_ab

# About 37 minutes, not part of `make bench`: the served rule groups with the host-map join against hosts named at scrape
# (node.host_identity: scrape) and the floor, in one run, then per scrape shard of two
# (bench/host_identity.py); adds its figures to docs/benchmarks.json and rewrites the report.
bench-host-identity: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.host_identity

# The metrics endpoint beside bare Prometheus (about 5 minutes); its figures replace the endpoint's in
# docs/benchmarks.json, and docs/benchmarks.md is rewritten.
bench-api: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.api

# Issue 37's burst against one serve process (about 10 minutes): statuses, latency, RSS (docs/api-limits.md).
bench-burst: venv promtool
	$(PY) -m bench.burst

# The archiver over 1,000 executions (bench/archive.py: time per execution, batched and not, and the archive's
# size; about 10 minutes); adds its figures to docs/benchmarks.json and rewrites docs/benchmarks.md.
bench-archive: venv promtool $(VENV)/.bench-installed
	$(PY) -m bench.archive

# The execution report's fleet view over 1,000 executions (about a minute); writes docs/benchmarks-report.md.
bench-report: venv promtool
	$(PY) -m bench.report

clean:
	rm -rf $(VENV) .pytest_cache build
