"""How a time is written for people, the same on every surface.

The CLI's tables and lines, the dashboard's pages and the text logs of the
coordinator and the SDK all write a moment as ``2026-12-04 03:12:45 UTC``:
UTC, seconds, the zone spelled out. Where two moments within one second must
be told apart (an event stream, log lines) the same shape carries
milliseconds: ``2026-12-04 03:12:45.120 UTC``. JSON output (``--json``, the
JSON log lines, the API) keeps RFC 3339 as machines read it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

__all__ = ["TIME_FORMAT", "TimeFormatter", "time_text"]

# strftime's spelling of the seconds form (``time_text`` adds milliseconds itself).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S UTC"


def time_text(value: datetime, *, milliseconds: bool = False) -> str:
    """``value`` as people read it: ``2026-12-04 03:12:45 UTC`` (a naive time is UTC).

    Args:
        value: The moment.
        milliseconds: Write ``03:12:45.120`` (truncated, not rounded).
    """
    utc = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    if not milliseconds:
        return utc.strftime(TIME_FORMAT)
    return f"{utc.strftime('%Y-%m-%d %H:%M:%S')}.{utc.microsecond // 1000:03d} UTC"


class TimeFormatter(logging.Formatter):
    """A log formatter whose ``%(asctime)s`` is :func:`time_text` with milliseconds.

    The text logs of the coordinator, the worker SDK and the ingress adapters
    use it, so their lines carry the time as the CLI and the dashboard write it
    (not the host's local time with a comma).
    """

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802 (logging's name)
        return time_text(datetime.fromtimestamp(record.created, UTC), milliseconds=True)
