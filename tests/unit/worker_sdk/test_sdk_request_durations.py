"""A job request's delay and timeouts that no timestamp or duration can hold
are refused with a ValueError naming the field, and the CLI's durations with a
usage error (never OverflowError)."""

from __future__ import annotations

import argparse
import math
from datetime import timedelta

import pytest

from worker_sdk import JobRequest
from worker_sdk.cli.commands import parse_duration


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"delay": math.inf}, "delay must be a finite number of seconds, not inf"),
        ({"delay": math.nan}, "delay must be a finite number of seconds, not nan"),
        ({"delay": 1e300}, "delay of 1e+300 seconds is too long"),
        ({"delay": 1e12}, "a delay of 1e+12 seconds reaches past the year 9999"),
        ({"delay": timedelta(days=999_999_999)}, "reaches past the year 9999"),
        ({"execution_timeout": math.inf}, "execution_timeout must be a finite number"),
        ({"execution_timeout": -math.inf}, "execution_timeout must be a finite number"),
        ({"heartbeat_timeout": 1e300}, "heartbeat_timeout of 1e+300 seconds is too long"),
        ({"heartbeat_timeout": "30"}, "heartbeat_timeout must be a number of seconds"),
    ],
)
def test_a_duration_no_message_can_hold_is_refused_naming_its_field(
    fields: dict[str, object], reason: str
) -> None:
    with pytest.raises(ValueError) as raised:
        JobRequest("t", **fields).to_proto()  # type: ignore[arg-type]
    assert reason in str(raised.value)


def test_ordinary_delays_and_timeouts_convert() -> None:
    spec = JobRequest("t", delay=-5, execution_timeout=2.5, heartbeat_timeout=timedelta(seconds=9))
    message = spec.to_proto()
    assert message.HasField("due_time")
    assert message.execution_timeout.ToTimedelta() == timedelta(seconds=2.5)
    assert message.heartbeat_timeout.seconds == 9


def test_the_cli_refuses_a_duration_too_long_to_hold_as_a_usage_error() -> None:
    assert parse_duration("90m") == timedelta(minutes=90)
    with pytest.raises(argparse.ArgumentTypeError, match="'99999999999999d' is too long"):
        parse_duration("99999999999999d")
