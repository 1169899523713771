"""Typed errors raised by the SDK, and exceptions handlers raise to steer retries.

Two families live here:

* :class:`WorkflowJobsError` and its subclasses: what a caller of the coordinator
  sees when an RPC fails. Each carries the gRPC status code.
* :class:`NonRetryableError` and :class:`RetryAfter`: what a handler raises to
  fail its attempt permanently or to ask for the next attempt at a given time.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime, timedelta
from typing import Any

import grpc

from workflowjobs.contract import LONGEST_SPAN, LONGEST_SPAN_DAYS

__all__ = [
    "AlreadyExistsError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "InvalidArgumentError",
    "JobNotFoundError",
    "LeaseLostError",
    "NonRetryableError",
    "PayloadDecodeError",
    "PayloadEncodeError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "RetryAfter",
    "UnauthenticatedError",
    "UnavailableError",
    "WorkflowJobsError",
    "error_from_rpc",
]


class WorkflowJobsError(Exception):
    """Root of every error the coordinator reports to the SDK.

    Args:
        code: The gRPC status code the coordinator answered with.
        message: The coordinator's explanation, meant for a person.
    """

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code.name}, message={self.message!r})"


class InvalidArgumentError(WorkflowJobsError):
    """The request was malformed (``INVALID_ARGUMENT``)."""


class JobNotFoundError(WorkflowJobsError):
    """The job (or other entity) does not exist (``NOT_FOUND``)."""


class FailedPreconditionError(WorkflowJobsError):
    """The request does not fit the current state (``FAILED_PRECONDITION``)."""


class LeaseLostError(FailedPreconditionError):
    """The lease token is stale: another attempt owns the job, or it ended."""


class AlreadyExistsError(WorkflowJobsError):
    """The entity already exists (``ALREADY_EXISTS``)."""


class PermissionDeniedError(WorkflowJobsError):
    """The credential lacks the role or tenant scope (``PERMISSION_DENIED``)."""


class UnauthenticatedError(WorkflowJobsError):
    """No valid credential was presented (``UNAUTHENTICATED``)."""


class ResourceExhaustedError(WorkflowJobsError):
    """A limit was hit, such as payload size or stream count (``RESOURCE_EXHAUSTED``)."""


class UnavailableError(WorkflowJobsError):
    """The coordinator could not be reached (``UNAVAILABLE``)."""


class OutOfRangeError(WorkflowJobsError):
    """The request reaches past what the coordinator keeps, such as an event
    cursor older than its event retention (``OUT_OF_RANGE``)."""


class DeadlineExceededError(WorkflowJobsError, TimeoutError):
    """The call's deadline passed before an answer (``DEADLINE_EXCEEDED``)."""


_ERROR_BY_CODE: dict[grpc.StatusCode, type[WorkflowJobsError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: JobNotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.OUT_OF_RANGE: OutOfRangeError,
}


def error_for_status(code: grpc.StatusCode, message: str) -> WorkflowJobsError:
    """Build the typed error for a status code and message.

    Args:
        code: The gRPC status code.
        message: The status message.

    Returns:
        The most specific :class:`WorkflowJobsError` subclass for ``code``.
    """
    if code == grpc.StatusCode.FAILED_PRECONDITION and "lease lost" in message.lower():
        return LeaseLostError(code, message)
    return _ERROR_BY_CODE.get(code, WorkflowJobsError)(code, message)


def error_from_rpc(error: grpc.RpcError) -> WorkflowJobsError:
    """Map a failed gRPC call to the SDK's typed error.

    Works for both ``grpc.RpcError`` raised by blocking stubs and
    ``grpc.aio.AioRpcError`` raised by asyncio stubs.

    Args:
        error: The exception the stub raised.

    Returns:
        The typed error; raise it ``from error`` to keep the original.
    """
    code_fn = getattr(error, "code", None)
    details_fn = getattr(error, "details", None)
    code = code_fn() if callable(code_fn) else None
    details = details_fn() if callable(details_fn) else None
    if not isinstance(code, grpc.StatusCode):
        code = grpc.StatusCode.UNKNOWN
    return error_for_status(code, details or str(error))


class NonRetryableError(Exception):
    """Raised by a handler to fail its attempt permanently: the job is faulted.

    Args:
        message: Why the job cannot succeed; recorded as the job's last error.
        kind: The error kind recorded with the failure. Defaults to the
            exception's class name.
    """

    def __init__(self, message: str, *, kind: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.kind = kind or type(self).__name__


class PayloadDecodeError(NonRetryableError):
    """The job's payload could not be decoded into the handler's parameter type."""


class PayloadEncodeError(TypeError):
    """A value could not be encoded into a payload."""


class RetryAfter(Exception):
    """Raised by a handler to fail this attempt and ask for the next one at a time.

    Give exactly one of ``at`` or ``delay``. The attempt still counts against
    the job's max attempts.

    Args:
        at: When the next attempt should start (a naive datetime is taken as UTC).
        delay: How long from now the next attempt should start.
        message: Recorded as the attempt's error.
    """

    def __init__(
        self,
        *,
        at: datetime | None = None,
        delay: timedelta | float | None = None,
        message: str = "",
    ) -> None:
        if (at is None) == (delay is None):
            raise ValueError("RetryAfter needs exactly one of 'at' or 'delay'")
        if delay is not None:
            if not isinstance(delay, timedelta):
                delay = timedelta(seconds=delay)
            at = datetime.now(UTC) + delay
        assert at is not None
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        self.at: datetime = at
        self.message = message or f"retry requested at {at.isoformat()}"
        super().__init__(self.message)


# The longest push-back the coordinator holds a rate limit for; a longer one
# (a downstream's Retry-After taken at its word) is reported as this long.
MAX_PUSH_BACK = LONGEST_SPAN


def bounded_push_back(retry_after: timedelta | float | None, logger: Any) -> timedelta | None:
    """``retry_after`` as a ``timedelta``: at most ``MAX_PUSH_BACK`` (longer, or an
    infinite number of seconds, is reported as that, with a warning); None stays None.

    Raises:
        ValueError: ``retry_after`` is negative or not a number (NaN).
    """
    if retry_after is None:
        return None
    if not isinstance(retry_after, timedelta):
        seconds = float(retry_after)
        if math.isnan(seconds):
            raise ValueError("retry_after must be a number of seconds, not NaN")
        if seconds < 0:
            raise ValueError("retry_after must not be negative")
        if seconds > MAX_PUSH_BACK.total_seconds():
            return _longest_push_back(f"{seconds:g}s", logger)
        retry_after = timedelta(seconds=seconds)
    if retry_after < timedelta(0):
        raise ValueError("retry_after must not be negative")
    if retry_after <= MAX_PUSH_BACK:
        return retry_after
    return _longest_push_back(str(retry_after), logger)


def _longest_push_back(asked: str, logger: Any) -> timedelta:
    logger.warning(
        "push-back retry_after of %s is longer than the coordinator holds a rate limit "
        "(%d days); reporting %d days (the attempt's outcome is not affected)",
        asked,
        LONGEST_SPAN_DAYS,
        LONGEST_SPAN_DAYS,
    )
    return MAX_PUSH_BACK


class Throttled(Exception):
    """Raised by a handler when the downstream it called pushed back (e.g. HTTP 429).

    The attempt fails and is retried (it counts against the job's max
    attempts): at ``retry_after`` from now when given, else by the job's retry
    policy. Like :meth:`JobContext.throttle`, it also reports the push-back,
    so every rate limit covering the job slows down for a while (see
    ``docs/limits.md``); jobs without a rate limit are only retried.

    Args:
        retry_after: How long the downstream asked to wait (seconds or a
            ``timedelta``), e.g. its ``Retry-After`` header; None when it said nothing.
        message: Recorded as the attempt's error.
    """

    def __init__(self, retry_after: timedelta | float | None = None, message: str = "") -> None:
        retry_after = bounded_push_back(retry_after, logging.getLogger("worker_sdk.job"))
        self.retry_after: timedelta | None = retry_after
        self.message = message or (
            "the downstream pushed back"
            + (f"; retry after {retry_after.total_seconds():g}s" if retry_after else "")
        )
        super().__init__(self.message)
