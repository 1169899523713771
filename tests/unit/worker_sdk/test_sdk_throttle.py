"""A handler reports downstream push-back: ``ctx.throttle`` keeps the handler
going, ``Throttled`` fails the attempt; either travels on the outcome."""

from __future__ import annotations

from datetime import timedelta

import pytest

from coordinator.api import convert
from coordinator.model import Completion, Failure
from worker_sdk import JobContext, Throttled
from worker_sdk._execution import failure, outcome_message
from worker_sdk.testing import make_job_context, run_handler
from workflowjobs.v1 import worker_service_pb2


def test_throttle_keeps_the_longest_retry_after_and_the_handler_goes_on() -> None:
    ctx = make_job_context({"n": 1})

    def handler(payload: dict, ctx: JobContext) -> str:
        ctx.throttle()
        ctx.throttle(2.5)
        ctx.throttle(timedelta(seconds=1))
        return "done"

    assert run_handler(handler, context=ctx) == "done"
    assert ctx.push_back == timedelta(seconds=2.5)
    with pytest.raises(ValueError, match="negative"):
        ctx.throttle(-1)


def test_throttle_without_retry_after_reports_a_zero_hold() -> None:
    ctx = make_job_context()
    assert ctx.push_back is None
    ctx.throttle()
    assert ctx.push_back == timedelta(0)


def test_throttled_exception_fails_the_attempt_and_reports_push_back() -> None:
    ctx = make_job_context()

    def handler(ctx: JobContext) -> None:
        raise Throttled(retry_after=4, message="429 from the mail API")

    with pytest.raises(Throttled, match="429 from the mail API"):
        run_handler(handler, context=ctx)
    assert ctx.push_back == timedelta(seconds=4)


def test_the_outcome_carries_push_back_to_the_coordinator() -> None:
    done = worker_service_pb2.Completion()
    message = outcome_message("job-1", "tok", done, timedelta(seconds=1.5))
    assert message.push_back.retry_after.ToTimedelta() == timedelta(seconds=1.5)
    assert convert.outcome_from_proto(message) == Completion(
        "job-1", "tok", b"", "", push_back_us=1_500_000
    )
    plain = outcome_message("job-1", "tok", failure("boom", "Boom"))
    assert not plain.HasField("push_back")
    assert convert.outcome_from_proto(plain) == Failure("job-1", "tok", "boom", "Boom")
    zero = outcome_message("job-1", "tok", done, timedelta(0))
    assert convert.outcome_from_proto(zero).push_back_us == 0


@pytest.mark.parametrize(
    "asked",
    [float("inf"), 1e300, 10**12, timedelta(days=400), timedelta.max],
    ids=["inf", "1e300", "1e12-int", "400-days", "timedelta-max"],
)
def test_a_push_back_beyond_a_year_is_reported_as_366_days_with_a_warning(
    asked: object, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = make_job_context()
    with caplog.at_level("WARNING"):
        ctx.throttle(asked)  # type: ignore[arg-type]
        thrown = Throttled(retry_after=asked)  # type: ignore[arg-type]
    assert ctx.push_back == thrown.retry_after == timedelta(days=366)
    assert sum("reporting 366 days" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.parametrize("asked", [float("nan"), -0.5, timedelta(seconds=-1)])
def test_a_push_back_that_is_no_duration_is_refused_where_the_handler_gives_it(
    asked: object,
) -> None:
    ctx = make_job_context()
    with pytest.raises(ValueError, match="NaN|negative"):
        ctx.throttle(asked)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="NaN|negative"):
        Throttled(retry_after=asked)  # type: ignore[arg-type]
    assert ctx.push_back is None
