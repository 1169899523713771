"""A job request's delay and timeouts that no timestamp or duration can hold
are refused with a ValueError naming the field, and the CLI's durations and
integers beyond what the protocol carries with a usage error naming the flag
(never OverflowError or a bare "Value out of range")."""

from __future__ import annotations

import argparse
import math
from datetime import timedelta

import pytest

from worker_sdk import JobRequest, Uniqueness
from worker_sdk.cli import build_parser
from worker_sdk.cli.arguments import parse_duration


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
        (
            {"uniqueness": Uniqueness.for_period("k", math.inf)},
            "uniqueness period must be a finite number of seconds",
        ),
        (
            {"uniqueness": Uniqueness.debounce("k", 5, 1e300)},
            "uniqueness max_wait of 1e+300 seconds is too long",
        ),
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


@pytest.mark.parametrize(
    "argv",
    [
        ["enqueue", "t", "{}", "--priority", "99999999999999999999"],
        ["enqueue", "t", "{}", "--max-attempts", "2147483648"],
        ["jobs", "list", "--limit", "-2147483649"],
    ],
)
def test_the_cli_refuses_an_integer_the_protocol_cannot_carry_naming_the_flag(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {argv[-2]}: {argv[-1]} is out of range (-2147483648..2147483647)" in err


def test_the_cli_takes_the_largest_integer_the_protocol_carries() -> None:
    args = build_parser().parse_args(["enqueue", "t", "{}", "--priority", "2147483647"])
    assert args.priority == 2**31 - 1
