"""``wfjobs-coordinator``: the coordinator's console script.

The package installs the script in every install, but the coordinator's own
dependencies (the store drivers, alembic, gRPC health and reflection,
OpenTelemetry) come with the ``coordinator`` extra. In a worker-only install
(``pip install workflow-jobs``) the script says so and which extra to install,
instead of ending in a ``ModuleNotFoundError`` traceback. It imports nothing of
the coordinator before that check.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

# Modules of the ``coordinator`` extra's distributions (pyproject.toml).
EXTRA_MODULES = (
    "alembic",
    "grpc_health",
    "grpc_reflection",
    "opentelemetry.exporter.otlp.proto.grpc",
    "opentelemetry.exporter.prometheus",
    "opentelemetry.instrumentation.grpc",
    "opentelemetry.sdk",
    "prometheus_client",
    "psycopg",
    "sqlalchemy",
)

INSTALL_HINT = (
    "wfjobs-coordinator: this install has the worker SDK only; the coordinator needs "
    "the 'coordinator' extra:\n"
    "    pip install 'workflow-jobs[coordinator]'\n"
    "(missing: {missing})"
)


def missing_modules() -> list[str]:
    """The modules of the ``coordinator`` extra this interpreter cannot import."""
    missing = []
    for name in EXTRA_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except ModuleNotFoundError:  # a parent package is missing
            found = False
        if not found:
            missing.append(name)
    return missing


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m coordinator`` with ``argv``; exit 1 with a hint without the extra."""
    missing = missing_modules()
    if missing:
        sys.stderr.write(INSTALL_HINT.format(missing=", ".join(missing)) + "\n")
        return 1
    from coordinator.__main__ import main as serve

    return serve(list(argv) if argv is not None else None)
