#!/usr/bin/env bash
# make bench / make bench-quick: create the bench-only environment if needed, then run.
#
#   bash bench/run.sh [figure ...] [--runs N] [--quick]
#
# The peers (PgQueuer, Procrastinate) are installed into .venv-bench only,
# never into the product's environment. PostgreSQL must listen on
# BENCH_PGHOST:BENCH_PGPORT (default 127.0.0.1:5432, user root, trust auth).
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv-bench
PYTHON=${BENCH_PYTHON:-python3.11}
STAMP="$VENV/.installed"
if [[ ! -x "$VENV/bin/python" ]]; then
  "$PYTHON" -m venv "$VENV"
fi
# Reinstall when the requirements or the project's dependencies changed.
if [[ ! -f "$STAMP" || bench/requirements.txt -nt "$STAMP" || pyproject.toml -nt "$STAMP" ]]; then
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e '.[coordinator]' -r bench/requirements.txt
  touch "$STAMP"
fi
exec "$VENV/bin/python" -m bench "$@"
