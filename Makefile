# The verbs people type. Everything installs itself into .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROTOS := $(wildcard protos/workflowjobs/v1/*.proto)

.PHONY: install run dashboard-screenshots test test-faults proto proto-check lint bench bench-quick clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

install: $(VENV)/.installed

node_modules/.installed: package.json
	npm install --no-audit --no-fund --loglevel=error
	touch $@

## Run a coordinator on the embedded SQLite store (./wfjobs.db) at 127.0.0.1:50051,
## with the web dashboard at http://127.0.0.1:8080 (WFJOBS_DASHBOARD_LISTEN= make run: none).
WFJOBS_DASHBOARD_LISTEN ?= 127.0.0.1:8080
run: install
	WFJOBS_DASHBOARD_LISTEN='$(WFJOBS_DASHBOARD_LISTEN)' $(PY) -m coordinator serve --migrate

## Retake the dashboard screenshots in docs/images/ (runs the browser tests).
dashboard-screenshots: install
	WFJOBS_SCREENSHOTS=docs/images $(PY) -m pytest -q tests/dashboard/test_dashboard_browser.py

## Run the whole test suite (needs PostgreSQL on 127.0.0.1:5432 for the PostgreSQL half):
## all but the fault scenarios in TEST_WORKERS pytest-xdist processes, a module's tests
## on one worker (most tests wait on real processes and sockets, so more workers than
## cores pays), then the fault scenarios alone, one at a time (they time recoveries).
TEST_WORKERS ?= 4
test: install
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --ignore=tests/faults
	$(PY) -m pytest tests/faults

## Run the fault-injection suite (part of `make test` too). A longer soak:
## WFJOBS_FAULTS_SCALE=10 make test-faults
test-faults: install
	$(PY) -m pytest tests/faults

## Regenerate the protobuf/gRPC code in workflowjobs/ from protos/.
proto: install
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. --pyi_out=. $(PROTOS)

## Fail if the generated code is not what protos/ produces.
proto-check: proto
	git diff --exit-code -- workflowjobs/

## Benchmark side by side with PgQueuer and Procrastinate (writes bench/results/latest.md).
bench:
	bash bench/run.sh

## Every figure at reduced size, in a few minutes (writes bench/results/quick.md).
bench-quick:
	bash bench/run.sh --quick

lint: install node_modules/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	npx buf lint

clean:
	rm -rf $(VENV) node_modules wfjobs.db*
