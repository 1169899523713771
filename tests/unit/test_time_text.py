"""Every surface writes a time for people the same way (workflowjobs.times): the
CLI's tables, the dashboard's pages and the text log lines."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta, timezone

from wfjobs_dashboard.views import when
from worker_sdk.cli.output import time_text as cli_time_text
from workflowjobs.times import TimeFormatter, time_text

MOMENT = datetime(2026, 12, 4, 3, 12, 45, 120_999, tzinfo=UTC)


def test_the_cli_and_the_dashboard_write_a_time_alike() -> None:
    elsewhere = MOMENT.astimezone(timezone(timedelta(hours=-5)))
    assert cli_time_text(elsewhere) == when(elsewhere) == "2026-12-04 03:12:45 UTC"
    assert time_text(MOMENT.replace(tzinfo=None)) == "2026-12-04 03:12:45 UTC"  # naive is UTC


def test_a_log_line_carries_the_same_time_to_the_millisecond() -> None:
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    record.created = MOMENT.timestamp()
    line = TimeFormatter("%(asctime)s %(levelname)s %(message)s").format(record)
    assert line == "2026-12-04 03:12:45.120 UTC INFO hello"
    assert cli_time_text(MOMENT, milliseconds=True) == "2026-12-04 03:12:45.120 UTC"
