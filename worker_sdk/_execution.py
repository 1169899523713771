"""Running one attempt: the one path from a leased job to its outcome.

Design note
-----------
:class:`~worker_sdk.Worker`, :class:`~worker_sdk.InlineRunner` and
:func:`worker_sdk.testing.run_handler` run a handler through
:func:`run_attempt`, so an attempt behaves the same wherever it runs:

1. bind the job's context (:func:`~worker_sdk.current_job`) and start the
   ``execute <job type>`` span;
2. decode the payload for the handler's parameter (a payload that does not
   fit fails the attempt for good: a retry would not fit better);
3. invoke the handler: an async one on the event loop, bounded by the job's
   execution timeout; a blocking one in the caller's thread pool, with the
   context variables copied in; the deadline also sets the cancel signal;
4. turn what happened into an outcome: ``Completion`` (the result encoded),
   ``Failure`` (error kind, non-retryable flag, the handler's retry policy
   applied) or ``Release`` (cancelled by shutdown, lease loss or a budget; a
   handler that raises once the shutdown set its cancel signal is handed back);
5. end the span, record the handler metrics, and log one line for a failed
   attempt (job id, type, attempt, error; a completed one only at DEBUG). An
   attempt whose cancel was requested is recorded as ``cancelled`` (the
   coordinator ends such a job CANCELLED whatever the attempt reports).

The caller owns what happens next (report it, hand the job back, return the
value to a test). What the handler returned or raised stays on the
:class:`Attempt` for callers that hand it on.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import functools
import logging
import os
import time
import traceback
from collections.abc import Callable
from concurrent.futures import Executor
from datetime import UTC, datetime, timedelta
from typing import Any

from workflowjobs.contract import MAX_TRACEBACK_BYTES
from workflowjobs.v1 import worker_service_pb2

from . import _metrics, _tracing
from ._codec import encode_payload
from ._context import CancelReason, JobContext, reset_current_job, set_current_job
from ._convert import to_timestamp
from ._errors import (
    NonRetryableError,
    PayloadDecodeError,
    PayloadEncodeError,
    RetryAfter,
    Throttled,
)
from ._handler import HandlerSpec

__all__ = ["Attempt", "Outcome", "failure", "outcome_message", "run_attempt"]

logger = logging.getLogger("worker_sdk.worker")

# Where the frames that call a handler live (left out of reported tracebacks).
_CALLER_DIRS = (
    os.path.dirname(__file__) + os.sep,
    os.path.dirname(concurrent.futures.__file__) + os.sep,
    os.path.dirname(asyncio.__file__) + os.sep,
)

Outcome = worker_service_pb2.Completion | worker_service_pb2.Failure | worker_service_pb2.Release
"""What an attempt ended with, as reported to the coordinator."""


@dataclasses.dataclass(eq=False)
class Attempt:
    """One attempt of a leased job, from start to outcome.

    Attributes:
        leased: The job and its lease as pushed by the coordinator.
        ctx: The handler's context.
        handler: The registered handler, or None when this process has none.
        lease_duration: Seconds the lease lasted when the job arrived.
        key: ``(job id, lease token)``: one attempt of one job (taken from
            ``leased`` when not given).
        task: The task running :func:`run_attempt`, once started.
        cancel_reason: Why the attempt is being stopped, once it is.
        handed_back: The job was released without waiting for the handler.
        timers: Timers to cancel when the attempt ends.
        span: The attempt's span while tracing is on.
        value: What the handler returned.
        error: What the handler raised (or the payload decode/encode error).
    """

    leased: worker_service_pb2.LeasedJob
    ctx: JobContext
    handler: HandlerSpec | None
    lease_duration: float | None
    key: tuple[str, str] = ("", "")
    task: asyncio.Task[Any] | None = None
    cancel_reason: str | None = None
    handed_back: bool = False
    timers: list[asyncio.TimerHandle] = dataclasses.field(default_factory=list)
    span: _tracing.ExecutionSpan | None = None
    value: Any = None
    error: BaseException | None = None

    def __post_init__(self) -> None:
        if not self.key[0]:
            self.key = (self.leased.job.id, self.leased.lease_token)


def failure(
    error: str,
    kind: str,
    *,
    non_retryable: bool = False,
    retry_time: datetime | None = None,
    exc: BaseException | None = None,
) -> worker_service_pb2.Failure:
    """A ``Failure`` outcome, with the traceback of ``exc`` when given."""
    result = worker_service_pb2.Failure(
        error=shown_text(error), error_kind=shown_text(kind), non_retryable=non_retryable
    )
    if exc is not None:
        result.traceback = shown_text(format_traceback(exc))
    if retry_time is not None:
        result.retry_time.CopyFrom(to_timestamp(retry_time))
    return result


def release(reason: str) -> worker_service_pb2.Release:
    """A ``Release`` outcome handing the job back for ``reason``."""
    return worker_service_pb2.Release(reason=shown_text(reason))


def shown_text(text: str) -> str:
    """``text`` with each NUL written ``\\x00``: the coordinator refuses a
    message whose strings hold U+0000, and an error message may well hold one
    (bytes in an exception's text); one such outcome must not stop the rest."""
    return text.replace("\x00", "\\x00") if "\x00" in text else text


def format_traceback(exc: BaseException, limit: int = MAX_TRACEBACK_BYTES) -> str:
    """``exc``'s formatted traceback; past ``limit`` UTF-8 bytes only its end is kept.

    The end names the error and the innermost frames, the part worth keeping;
    the coordinator keeps at most the same amount. The frames of this SDK and
    of the thread pool that called the handler are left out: the traceback
    starts in the user's code.
    """
    summary = traceback.TracebackException.from_exception(exc)
    frames = list(summary.stack)
    while len(frames) > 1 and frames[0].filename.startswith(_CALLER_DIRS):
        frames.pop(0)
    summary.stack = traceback.StackSummary.from_list(frames)
    text = "".join(summary.format())
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    tail = data[-limit:].decode("utf-8", errors="ignore")
    return f"[{len(data) - len(tail.encode('utf-8'))} earlier bytes cut]\n{tail}"


def outcome_message(
    job_id: str, lease_token: str, outcome: Outcome, push_back: timedelta | None = None
) -> worker_service_pb2.JobOutcome:
    """The ``JobOutcome`` reporting ``outcome`` for one lease, with the
    handler's push-back report (``JobContext.throttle``) when there is one."""
    message = worker_service_pb2.JobOutcome(job_id=job_id, lease_token=lease_token)
    if push_back is not None:
        message.push_back.retry_after.FromTimedelta(push_back)
    if isinstance(outcome, worker_service_pb2.Completion):
        message.completed.CopyFrom(outcome)
    elif isinstance(outcome, worker_service_pb2.Failure):
        message.failed.CopyFrom(outcome)
    else:
        message.released.CopyFrom(outcome)
    return message


async def run_attempt(
    attempt: Attempt,
    *,
    executor: Executor | None,
    worker_id: str,
    traced: Callable[[Outcome], Outcome] | None = None,
) -> Outcome:
    """Run the attempt's handler and return its outcome (see the module's design note).

    Never raises for anything the handler does: a cancelled task returns the
    outcome its cancel reason calls for.

    Args:
        attempt: The attempt to run.
        executor: Thread pool of blocking handlers; None for the loop's default.
        worker_id: Named in the failure of a job type this process cannot run.
        traced: Maps the outcome to the one recorded on the span and in the
            metrics, when the caller reports something else (an inline hand-off).
    """
    ctx = attempt.ctx
    token = set_current_job(ctx)
    started = time.monotonic()
    attempt.span = _tracing.start_execution(ctx)
    try:
        outcome = await _invoke(attempt, executor, worker_id)
        if attempt.cancel_reason == CancelReason.WORKER_SHUTDOWN and isinstance(
            outcome, worker_service_pb2.Failure
        ):
            # Stopped by the shutdown (its cancel signal): handed back, not failed.
            outcome = release(CancelReason.WORKER_SHUTDOWN)
    except asyncio.CancelledError:
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        outcome = outcome_after_cancel(attempt)
    except Exception as exc:  # noqa: BLE001 - a bug here must not lose the job
        logger.exception("internal error running job %s", ctx.job_id)
        outcome = failure(f"{type(exc).__name__}: {exc}", type(exc).__name__, exc=exc)
    finally:
        reset_current_job(token)
        for timer in attempt.timers:
            timer.cancel()
    recorded = traced(outcome) if traced is not None else outcome
    seconds = time.monotonic() - started
    # A cancel was requested: the job ends CANCELLED however the attempt
    # stops (a completion's result is still reported and kept).
    cancelled = attempt.cancel_reason == CancelReason.CANCEL_REQUESTED
    if cancelled and isinstance(outcome, worker_service_pb2.Completion):
        ctx.logger.info(
            "job %s returned after its cancel was requested; it ends CANCELLED", ctx.job_id
        )
    if attempt.span is not None:
        attempt.span.finish(recorded, cancelled=cancelled)
    _metrics.record_handler(ctx.job_type, seconds, recorded, cancelled=cancelled)
    _log_outcome(ctx, recorded, seconds)
    return outcome


def _log_outcome(ctx: JobContext, outcome: Outcome, seconds: float) -> None:
    """One line per failed attempt; a completed one only at DEBUG."""
    if not isinstance(outcome, worker_service_pb2.Failure) and not ctx._logs(logging.DEBUG):
        return
    what = f"job {ctx.job_id} ({ctx.job_type}) attempt {ctx.attempt}/{ctx.max_attempts}"
    if isinstance(outcome, worker_service_pb2.Failure):
        if outcome.non_retryable:
            next_step = "; not retryable"
        elif ctx.attempt >= ctx.max_attempts > 0:
            next_step = "; no attempts left"
        else:
            next_step = ""
        ctx.logger.warning("%s failed after %.3fs: %s%s", what, seconds, outcome.error, next_step)
    elif isinstance(outcome, worker_service_pb2.Completion):
        ctx.logger.debug("%s completed in %.3fs", what, seconds)
    else:
        ctx.logger.debug("%s released: %s", what, outcome.reason)


def outcome_after_cancel(attempt: Attempt) -> Outcome:
    """The outcome of an attempt whose task was cancelled."""
    reason = attempt.cancel_reason or CancelReason.WORKER_SHUTDOWN
    if reason == CancelReason.CANCEL_REQUESTED:
        return failure(
            "JobCancelledError: cancel requested", "JobCancelledError", non_retryable=True
        )
    return release(reason)


async def _invoke(attempt: Attempt, executor: Executor | None, worker_id: str) -> Outcome:
    ctx = attempt.ctx
    handler = attempt.handler
    if handler is None:
        return failure(
            f"UnknownJobType: worker {worker_id} has no handler for {ctx.job_type!r}",
            "UnknownJobType",
        )
    try:
        kwargs = handler.arguments(ctx)
    except PayloadDecodeError as exc:
        attempt.error = exc
        return failure(f"{type(exc).__name__}: {exc}", exc.kind, non_retryable=True, exc=exc)
    deadline_in = (
        (ctx.deadline - datetime.now(UTC)).total_seconds() if ctx.deadline is not None else None
    )
    if deadline_in is not None:
        loop = asyncio.get_running_loop()
        attempt.timers.append(
            loop.call_later(max(0.0, deadline_in), ctx._cancel, CancelReason.DEADLINE_EXCEEDED)
        )
    try:
        if handler.is_async and deadline_in is None:
            scope = None
            result = await handler.func(**kwargs)
        elif handler.is_async:
            async with asyncio.timeout(deadline_in) as scope:
                result = await handler.func(**kwargs)
        else:
            scope = None
            call = functools.partial(contextvars.copy_context().run, handler.func, **kwargs)
            result = await asyncio.get_running_loop().run_in_executor(executor, call)
    except TimeoutError as exc:
        attempt.error = exc
        if scope is not None and scope.expired():
            timeout = ctx.job.execution_timeout.ToTimedelta().total_seconds()
            return failure(
                f"TimeoutError: execution timeout of {timeout:g}s exceeded", "TimeoutError", exc=exc
            )
        return _failure_from_exception(handler, ctx, exc)
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # noqa: BLE001 - every handler error becomes a Failure
        attempt.error = exc
        return _failure_from_exception(handler, ctx, exc)
    attempt.value = result
    try:
        payload = encode_payload(result)
    except PayloadEncodeError as exc:
        attempt.error = exc
        return failure(
            f"PayloadEncodeError: {exc}", "PayloadEncodeError", non_retryable=True, exc=exc
        )
    return worker_service_pb2.Completion(result=payload)


def _failure_from_exception(
    handler: HandlerSpec, ctx: JobContext, exc: Exception
) -> worker_service_pb2.Failure:
    error = f"{type(exc).__name__}: {exc}"
    _tracing.record_exception(exc)
    if isinstance(exc, NonRetryableError):
        return failure(error, exc.kind, non_retryable=True, exc=exc)
    if isinstance(exc, RetryAfter):
        return failure(error, type(exc).__name__, retry_time=exc.at, exc=exc)
    if isinstance(exc, Throttled):
        ctx.throttle(exc.retry_after)
        if exc.retry_after is not None:
            at = datetime.now(UTC) + exc.retry_after
            return failure(error, type(exc).__name__, retry_time=at, exc=exc)
    kind = type(exc).__name__
    non_retryable, retry_time = handler.retry_time(ctx.attempt, kind)
    return failure(error, kind, non_retryable=non_retryable, retry_time=retry_time, exc=exc)
