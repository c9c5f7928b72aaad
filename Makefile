# brokergate — two commands: `make run` serves the gateway, `make test` runs everything.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8082
# empty: the gateway's default, 127.0.0.1 while authentication is off (make run HOST=0.0.0.0 to serve others)
HOST   ?=
# processes the suite runs in (pytest-xdist); each takes whole test files, so a module's servers
# start once, and starts the session's own (one Kafka broker, one Spark session each)
TEST_WORKERS ?= 2

# Debian packages the tests use: curl runs the README walk-through, zookeeper and redis-server
# are the real servers of the coordinator and sessions suites, Java 17 runs them and Apache Kafka
# and Spark, Maven fetches Kafka and Spark's Kafka source (`make jars`), chromium and
# chromium-driver are the browser of the web console's.
# Node.js and npm run the TypeScript client generated from openapi.yaml and Redocly's linter
# (tests/e2e/test_typescript_client.py): installed when no node is on the PATH (any will do).
SYSTEM_PACKAGES := curl openjdk-17-jre-headless maven zookeeper redis-server nginx chromium chromium-driver

.PHONY: run test lint unit bench openapi docs clean system-packages jars

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,spark]'
	touch $(VENV)/.installed $@

## serve the gateway on the embedded backends (no Kafka, ZooKeeper or Redis needed)
run: $(VENV)/.installed
	$(BIN)/brokergate serve --port $(PORT) $(if $(HOST),--host $(HOST))

## install what the tests need, then lint, type-check and run the whole suite
test: $(VENV)/.installed-test system-packages jars
	$(MAKE) lint
	$(BIN)/pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=40

system-packages:
	@missing=""; for p in $(SYSTEM_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
	@if ! command -v node >/dev/null 2>&1; then \
		echo "installing: nodejs npm"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm; \
	fi

## Apache Kafka and Spark's Kafka source from Maven Central, once, into .cache/jars (offline after)
jars: $(VENV)/.installed-test system-packages
	$(BIN)/python -m deploy.jars

lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m tests.import_graph

unit: $(VENV)/.installed-test
	$(BIN)/pytest -q tests/unit

## regenerate openapi.yaml from the app
openapi: $(VENV)/.installed-test
	$(BIN)/python -m service.server.openapi > openapi.yaml

$(VENV)/.installed-docs: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[docs]'
	touch $@

## build the documentation site (docs/, mkdocs.yml) into build/site; a broken link fails it
docs: $(VENV)/.installed-docs
	$(BIN)/mkdocs build --strict --site-dir build/site

bench: $(VENV)/.installed-test
	$(BIN)/python bench/embedded.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
