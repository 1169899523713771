"""JSON log lines for workers and the coordinator: one object per record.

Both write the same fields, so this lives beside the contract they share
(the generated protobuf modules of ``workflowjobs.v1``), where
``worker_sdk`` (as :mod:`worker_sdk.jsonlog`) and ``coordinator`` each
import it without importing the other.

Every line has ``time`` (UTC, ISO 8601), ``level``, ``logger`` and ``message``;
the job fields that :attr:`JobContext.logger` adds (``job_id``, ``job_type``,
``tenant_id``, ``attempt``) and any of ``worker_id``, ``trace_id`` and
``span_id`` given as ``extra`` are copied as they are. When OpenTelemetry is in
use and a span is current, its trace and span ids are added. Exceptions
appear as ``exception`` (the formatted traceback).

Use it in a worker process::

    from worker_sdk import jsonlog

    jsonlog.configure("INFO")
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import IO, Any

__all__ = ["JsonFormatter", "configure"]

# Record attributes copied to the JSON object when present.
FIELDS = (
    "job_id",
    "job_type",
    "tenant_id",
    "attempt",
    "worker_id",
    "coordinator_id",
    "trace_id",
    "span_id",
)


def _current_trace_ids() -> tuple[str, str] | None:
    # Only look when the application (or this package) already imported
    # OpenTelemetry: a plain worker never pays for the import.
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return format(context.trace_id, "032x"), format(context.span_id, "016x")


class JsonFormatter(logging.Formatter):
    """Formats each record as one JSON object on one line."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in FIELDS:
            value = record.__dict__.get(name)
            if value is not None and value != "":
                data[name] = value
        if "trace_id" not in data:
            ids = _current_trace_ids()
            if ids is not None:
                data["trace_id"], data["span_id"] = ids
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            data["exception"] = record.exc_text
        return json.dumps(data, ensure_ascii=False, default=str)


def configure(level: str | int = "INFO", stream: IO[str] | None = None) -> logging.Handler:
    """Send the root logger's records to ``stream`` (stderr) as JSON lines.

    Args:
        level: The root logger's level.
        stream: Where to write; defaults to ``sys.stderr``.

    Returns:
        The installed handler (replacing the root logger's handlers).
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper() if isinstance(level, str) else level)
    return handler
