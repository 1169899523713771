# The verbs people type. Everything installs itself into .venv on first use.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PROTOS := $(wildcard protos/workflowjobs/v1/*.proto)

.PHONY: install bytecode run dashboard-screenshots test test-faults proto proto-check lint bench bench-quick clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

## The npm side (one workspace, one committed lockfile): buf for `make lint`, and
## the TypeScript SDK (sdks/typescript), built into sdks/typescript/dist with its
## example worker (examples/typescript/dist). Skipped, with a note, without npm.
TS_SOURCES := $(shell find sdks/typescript/src sdks/typescript/test sdks/typescript/conformance sdks/typescript/bench examples/typescript -name '*.ts' -not -path '*/dist/*' 2>/dev/null)
TS_BUILT := sdks/typescript/dist/.built

node_modules/.installed: package.json package-lock.json sdks/typescript/package.json
	@if command -v npm >/dev/null 2>&1; then \
	  npm ci --no-audit --no-fund --loglevel=error && touch $@; \
	else echo "npm not found: the TypeScript SDK is not installed (Node.js 20+ installs it)"; fi

install: $(VENV)/.installed $(TS_BUILT)

$(TS_BUILT): node_modules/.installed $(TS_SOURCES) sdks/typescript/tsconfig.json examples/typescript/tsconfig.json
	@if [ -f node_modules/.installed ]; then \
	  npx tsc -p sdks/typescript/tsconfig.json && npx tsc -p examples/typescript/tsconfig.json && touch $@; fi

## Run a coordinator on the embedded SQLite store (./wfjobs.db) at 127.0.0.1:50051,
## with the web dashboard at http://127.0.0.1:8080 (WFJOBS_DASHBOARD_LISTEN= make run: none).
WFJOBS_DASHBOARD_LISTEN ?= 127.0.0.1:8080
run: install
	@echo "wfjobs, grpcurl and python are in $(VENV)/bin: run '. $(VENV)/bin/activate' in each new terminal"
	WFJOBS_DASHBOARD_LISTEN='$(WFJOBS_DASHBOARD_LISTEN)' $(PY) -m coordinator serve --migrate

## Retake the dashboard screenshots in docs/images/ (runs the browser tests).
dashboard-screenshots: install
	WFJOBS_SCREENSHOTS=docs/images $(PY) -m pytest -q tests/dashboard/test_dashboard_browser.py

## Byte-compile the project's modules up front: every test starts coordinators, workers
## and `wfjobs` as processes, and where PYTHONDONTWRITEBYTECODE is set (or the tree is
## read-only) each of them would otherwise compile its sources again.
bytecode:
	@$(PY) -m compileall -q -j 0 coordinator worker_sdk wfjobs_dashboard workflowjobs examples bench tests > /dev/null

## Run the whole test suite (needs PostgreSQL on 127.0.0.1:5432 for the PostgreSQL half):
## all but the fault scenarios in TEST_WORKERS pytest-xdist processes, a module's tests
## on one worker (most tests wait on real processes and sockets, so more workers than
## cores pays), then the fault scenarios alone, one at a time (they time recoveries).
TEST_WORKERS ?= 4
test: install bytecode
	cd sdks/typescript && node --test dist/test/
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadscope --durations=30 --ignore=tests/faults
	$(PY) -m pytest --durations=10 tests/faults

## Run the fault-injection suite (part of `make test` too). A longer soak:
## WFJOBS_FAULTS_SCALE=10 make test-faults
test-faults: install
	$(PY) -m pytest --durations=10 tests/faults

## Regenerate the protobuf/gRPC code from protos/: Python in workflowjobs/, and
## TypeScript (ts-proto, for @grpc/grpc-js) in sdks/typescript/src/gen/, and the API
## reference docs/api.md from the protos' comments (protos/api_reference.py).
TS_PROTO_OPTS := outputServices=grpc-js,env=node,esModuleInterop=true,oneof=unions,useDate=true,forceLong=bigint
## KEDA's external scaler interface is generated into workflowjobs/externalscaler/.
proto: install
	$(PY) -m grpc_tools.protoc -Iprotos --python_out=. --grpc_python_out=. --pyi_out=. $(PROTOS)
	$(PY) -m grpc_tools.protoc -Iworkflowjobs/externalscaler=protos/externalscaler \
		--python_out=. --grpc_python_out=. --pyi_out=. protos/externalscaler/externalscaler.proto
	rm -rf sdks/typescript/src/gen && mkdir -p sdks/typescript/src/gen
	$(PY) -m grpc_tools.protoc -Iprotos --plugin=protoc-gen-ts_proto=node_modules/.bin/protoc-gen-ts_proto \
	  --ts_proto_out=sdks/typescript/src/gen --ts_proto_opt=$(TS_PROTO_OPTS) $(PROTOS)
	$(PY) protos/api_reference.py

## Fail if the generated code (and docs/api.md) is not what protos/ produces.
proto-check: proto
	git diff --exit-code -- workflowjobs/ sdks/typescript/src/gen/ docs/api.md
	@test -z "$$(git status --porcelain -- workflowjobs/ sdks/typescript/src/gen/ docs/api.md)" || \
	  { git status --short -- workflowjobs/ sdks/typescript/src/gen/ docs/api.md; exit 1; }

## Benchmark side by side with PgQueuer and Procrastinate (writes bench/results/latest.md).
bench:
	bash bench/run.sh

## Every figure at reduced size, in a few minutes (writes bench/results/quick.md).
bench-quick:
	bash bench/run.sh --quick

lint: install node_modules/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	npx buf lint

clean:
	rm -rf $(VENV) node_modules sdks/typescript/dist examples/typescript/dist wfjobs.db*
