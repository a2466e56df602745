# Brass Relay: `make up` starts everything, `make test` runs every check CI runs.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# `make up RELAY_PORT=8010` (or the variables in the environment) moves the relay and the demo
# agents, which take four ports from RELAY_AGENTS_PORT on.
RELAY_PORT ?= 8000
RELAY_AGENTS_PORT ?= 9301
# The gRPC A2A server (manage.py run_grpc) beside daphne; 0 starts none.
RELAY_GRPC_PORT ?= 8001

# pytest-xdist: three workers on the two cores, as the live modules mostly wait on the servers
# they start; a module's tests stay on one worker (loadfile), so a live module's relay starts
# once (loadgroup does not group under pytest 9: xdist 3.8 writes the group into a node
# attribute pytest 9 no longer reads). The chaos modules run in the same run, collected first
# (tests/conftest.py): each has a cluster of its own on free ports and mostly waits on outages
# and timeouts, so a fourth worker keeps both cores busy while they take two. The one test
# marked `alone` (64 clients, a p99 latency bound: it failed beside the rest of the suite)
# runs after, by itself; it lives in tests/chaos (tests/conftest.py checks), so only that
# directory is collected for it. Exit 5 (no test collected) is no failure.
PYTEST_PARALLEL ?= -n 4 --dist loadfile --no-loadscope-reorder
# test-fast is mostly CPU, with some waits (timeouts, subprocesses): on a quiet 2-core machine
# three workers taking test by test (no module there starts a server) finished in 178 s, two
# workers taking whole modules in 219 s.
FAST_PARALLEL ?= -n 3 --dist load
FAST_TESTS := not (live or browser or chaos or fuzz or production)
# The fuzz modules (FUZZ_MODULES in tests/conftest.py) are not even collected: Schemathesis
# loads the API schema and builds its tests at collection, 2.5 s of CPU in every worker, for
# tests the marker leaves out anyway.
FAST_IGNORE := --ignore=tests/registry/test_api_fuzz.py --ignore=tests/tasks_app/test_gateway_fuzz.py
# Bytecode caches for every target, under var/ (as git ignores it), also where the environment
# sets PYTHONDONTWRITEBYTECODE: else every test worker, and every relay, agent and manage.py a
# test or `make up` starts, compiles some 3,000 modules again (3 s of CPU for one start of
# Django), and pytest rewrites the asserts of every test module in each worker.
export PYTHONDONTWRITEBYTECODE :=
export PYTHONPYCACHEPREFIX := $(CURDIR)/var/pycache

.PHONY: up test test-fast lint bench clean docs diagram

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "$(PYTHON) not found; run: make PYTHON=python3 ..."; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet uv
	$(BIN)/uv pip install --quiet --python $(BIN)/python -e ".[dev]"
	touch $(STAMP)

up: $(STAMP)
	DJANGO_DEBUG=$${DJANGO_DEBUG:-true} $(BIN)/python manage.py run_relay \
		--port $(RELAY_PORT) --agents-port $(RELAY_AGENTS_PORT) --grpc-port $(RELAY_GRPC_PORT)

# A make of its own builds the venv inside test's recipe, called through this variable: a line
# naming MAKE itself would be run, not printed, by `make -n test` (the printed-commands test).
BUILD_VENV = $(MAKE) --no-print-directory $(STAMP)

# The tools the tests need are fetched side by side (apt, npm: mostly waiting on the network)
# while the virtualenv is built; then the a2a-sdk 0.3 virtualenv, so no test worker waits for
# it, beside the checks that need none of them (ruff, the migration check; the strict docs
# build is tests/test_docs.py's). The first that fails fails the target once all are done.
test:
	{ bash scripts/ensure-chromium; bash scripts/ensure-postgres; bash scripts/ensure-graphviz; } & \
	bash scripts/ensure-js & \
	$(BUILD_VENV) && { \
	  { $(BIN)/python -m tests.sdk03 >/dev/null || echo "a2a-sdk 0.3 could not be built; its tests will skip."; } & \
	  $(BIN)/ruff check . && \
	  $(BIN)/ruff format --check . && \
	  $(BIN)/python manage.py makemigrations --check --dry-run; }; \
	checks=$$?; wait; exit $$checks
	RELAY_FUZZ_PROFILE=ci $(BIN)/pytest $(PYTEST_PARALLEL) -m "not alone" --durations=25
	$(BIN)/pytest tests/chaos -m alone --durations=5 || test $$? -eq 5

# The edit loop (minutes): the pure cores and in-process tests, none of the kinds marked in
# tests/conftest.py as slow (subprocess servers, browser, chaos, fuzzing, PostgreSQL).
test-fast: $(STAMP)
	$(BIN)/pytest $(FAST_PARALLEL) -m "$(FAST_TESTS)" $(FAST_IGNORE) --durations=10 \
		|| test $$? -eq 5

# The documentation site (docs/, mkdocs.yml) into site/; strict: a broken link fails.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict

# The README's architecture picture, from its Graphviz source (tests/test_docs.py checks it).
diagram:
	$(BIN)/python scripts/render_diagram.py

bench: $(STAMP)
	$(BIN)/python bench/registry_bench.py

clean:
	rm -rf $(VENV) var site .pytest_cache .ruff_cache
