"""What a worker prints out of the box.

Design note
-----------
Without any logging set up by the application, a worker writes to stderr:

* one line at start: worker id, SDK version, coordinator, job types, slots;
* connection state changes: connected, cannot connect / lost (with the
  reason), reconnected (after how long);
* one line per failed attempt: job id, job type, attempt, the error;
* the handlers' own ``ctx.logger`` lines;

and nothing per successful job unless asked (``WFJOBS_LOG_LEVEL=DEBUG``).

The level is ``WFJOBS_LOG_LEVEL`` (default ``INFO``), applied to the
``worker_sdk`` loggers; the format is ``WFJOBS_LOG_FORMAT``: ``text`` (default)
or ``json`` (one object per line, :mod:`workflowjobs.jsonlog`). When the
application configured logging itself (the root logger has a handler), its
handlers get the records and nothing is installed; ``WFJOBS_LOG_LEVEL``, when
set, still sets the level of the ``worker_sdk`` loggers.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from workflowjobs.jsonlog import JsonFormatter
from workflowjobs.times import TimeFormatter

__all__ = ["LEVEL_ENV", "FORMAT_ENV", "install_default_logging"]

LEVEL_ENV = "WFJOBS_LOG_LEVEL"
FORMAT_ENV = "WFJOBS_LOG_FORMAT"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")

_SDK_LOGGER = "worker_sdk"
_installed: logging.Handler | None = None


def install_default_logging(env: Mapping[str, str] | None = None) -> logging.Handler | None:
    """Apply ``WFJOBS_LOG_LEVEL``/``WFJOBS_LOG_FORMAT`` (see the module's design note).

    Idempotent: a second call changes nothing.

    Returns:
        The stderr handler installed on the ``worker_sdk`` logger, or None when
        the application configured logging itself.

    Raises:
        ValueError: A variable holds a value it cannot take.
    """
    global _installed
    env = os.environ if env is None else env
    level_name = env.get(LEVEL_ENV, "").strip().upper()
    log_format = env.get(FORMAT_ENV, "").strip().lower() or "text"
    if level_name and level_name not in _LEVELS:
        raise ValueError(f"{LEVEL_ENV} must be one of {', '.join(_LEVELS)}, not {env[LEVEL_ENV]!r}")
    if log_format not in ("text", "json"):
        raise ValueError(f"{FORMAT_ENV} must be 'text' or 'json', not {env[FORMAT_ENV]!r}")
    sdk_logger = logging.getLogger(_SDK_LOGGER)
    if level_name:
        sdk_logger.setLevel(level_name)
    if _installed is not None:
        return _installed
    if logging.getLogger().handlers or sdk_logger.handlers:
        return None
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TimeFormatter(TEXT_FORMAT))
    sdk_logger.addHandler(handler)
    if not level_name:
        sdk_logger.setLevel(logging.INFO)
    _installed = handler
    return handler
