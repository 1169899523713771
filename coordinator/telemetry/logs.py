"""Coordinator log output: plain text (default) or JSON lines (``WFJOBS_LOG_FORMAT=json``).

JSON lines use the formatter workers use (:mod:`workflowjobs.jsonlog`), so workers and
coordinators log the same fields: time, level, logger, message, and job id,
tenant, trace id and span id where known (the trace ids of the current span,
e.g. the RPC being served).
"""

from __future__ import annotations

import logging
import sys

from coordinator.masking import mask_credentials
from workflowjobs.jsonlog import JsonFormatter
from workflowjobs.times import TimeFormatter

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class MaskingFormatter(logging.Formatter):
    """Formats with ``inner``, then masks any credential in the line.

    Masking the finished line covers the message, its arguments and any
    exception text (a driver error may quote a connection string).
    """

    def __init__(self, inner: logging.Formatter) -> None:
        super().__init__()
        self._inner = inner

    def format(self, record: logging.LogRecord) -> str:
        return mask_credentials(self._inner.format(record))


def configure_logging(log_format: str = "text", level: str = "INFO") -> None:
    """Send the root logger to stderr as ``text`` or ``json``, credentials masked.

    Raises:
        ValueError: ``log_format`` is neither.
    """
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(MaskingFormatter(JsonFormatter()))
    elif log_format == "text":
        handler.setFormatter(MaskingFormatter(TimeFormatter(TEXT_FORMAT)))
    else:
        raise ValueError(f"WFJOBS_LOG_FORMAT must be 'text' or 'json', not {log_format!r}")
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


__all__ = ["MaskingFormatter", "configure_logging"]
