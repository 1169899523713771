"""Coordinator log output: plain text (default) or JSON lines (``WFJOBS_LOG_FORMAT=json``).

JSON lines use the SDK's formatter (:mod:`worker_sdk.jsonlog`), so workers and
coordinators log the same fields: time, level, logger, message, and job id,
tenant, trace id and span id where known (the trace ids of the current span,
e.g. the RPC being served).
"""

from __future__ import annotations

import logging
import sys

from worker_sdk.jsonlog import JsonFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


def configure_logging(log_format: str = "text", level: str = "INFO") -> None:
    """Send the root logger to stderr as ``text`` or ``json``.

    Raises:
        ValueError: ``log_format`` is neither.
    """
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
    elif log_format == "text":
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    else:
        raise ValueError(f"WFJOBS_LOG_FORMAT must be 'text' or 'json', not {log_format!r}")
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


__all__ = ["configure_logging"]
