"""How a time is written for people, the same on every surface.

The CLI's tables and lines, the dashboard's pages and the text logs of the
coordinator and the SDK all write a moment as ``2026-12-04 03:12:45 UTC``:
UTC, seconds, the zone spelled out. Where two moments within one second must
be told apart (an event stream, log lines) the same shape carries
milliseconds: ``2026-12-04 03:12:45.120 UTC``. JSON output (``--json``, the
JSON log lines, the API) keeps RFC 3339 as machines read it.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["TIME_FORMAT", "time_text"]

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
