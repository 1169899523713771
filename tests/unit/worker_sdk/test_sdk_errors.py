"""Typed errors: status code mapping and handler-side exceptions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import grpc
import pytest

from worker_sdk import (
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    JobNotFoundError,
    LeaseLostError,
    NonRetryableError,
    PermissionDeniedError,
    ResourceExhaustedError,
    RetryAfter,
    UnauthenticatedError,
    UnavailableError,
    WorkflowJobsError,
    error_from_rpc,
)


class FakeRpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code = code
        self._details = details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


@pytest.mark.parametrize(
    ("code", "details", "expected"),
    [
        (grpc.StatusCode.INVALID_ARGUMENT, "job_type must not be empty", InvalidArgumentError),
        (grpc.StatusCode.NOT_FOUND, "job 1 not found", JobNotFoundError),
        (grpc.StatusCode.FAILED_PRECONDITION, "lease lost: stale token", LeaseLostError),
        (grpc.StatusCode.FAILED_PRECONDITION, "job is COMPLETED", FailedPreconditionError),
        (grpc.StatusCode.ALREADY_EXISTS, "exists", AlreadyExistsError),
        (grpc.StatusCode.PERMISSION_DENIED, "tenant b", PermissionDeniedError),
        (grpc.StatusCode.UNAUTHENTICATED, "no token", UnauthenticatedError),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "payload too large", ResourceExhaustedError),
        (grpc.StatusCode.UNAVAILABLE, "connection refused", UnavailableError),
        (grpc.StatusCode.DEADLINE_EXCEEDED, "deadline", DeadlineExceededError),
        (grpc.StatusCode.INTERNAL, "boom", WorkflowJobsError),
    ],
)
def test_error_from_rpc_maps_status_codes(
    code: grpc.StatusCode, details: str, expected: type[WorkflowJobsError]
) -> None:
    error = error_from_rpc(FakeRpcError(code, details))

    assert type(error) is expected
    assert error.code == code
    assert error.message == details
    assert code.name in str(error)


def test_lease_lost_is_a_failed_precondition() -> None:
    error = error_from_rpc(FakeRpcError(grpc.StatusCode.FAILED_PRECONDITION, "Lease lost"))

    assert isinstance(error, FailedPreconditionError)
    assert isinstance(error, WorkflowJobsError)


def test_deadline_exceeded_is_a_timeout_error() -> None:
    error = error_from_rpc(FakeRpcError(grpc.StatusCode.DEADLINE_EXCEEDED, "late"))

    assert isinstance(error, TimeoutError)


def test_non_retryable_error_kind_defaults_to_class_name() -> None:
    class CardDeclined(NonRetryableError):
        pass

    assert NonRetryableError("bad input").kind == "NonRetryableError"
    assert CardDeclined("declined").kind == "CardDeclined"
    assert NonRetryableError("bad", kind="Validation").kind == "Validation"


def test_retry_after_accepts_delay_or_time() -> None:
    before = datetime.now(UTC)
    by_delay = RetryAfter(delay=timedelta(seconds=30))
    by_seconds = RetryAfter(delay=5)
    at = datetime(2030, 1, 1)
    by_time = RetryAfter(at=at)

    assert by_delay.at >= before + timedelta(seconds=30)
    assert by_seconds.at >= before + timedelta(seconds=5)
    assert by_time.at == at.replace(tzinfo=UTC)
    with pytest.raises(ValueError, match="exactly one"):
        RetryAfter()
    with pytest.raises(ValueError, match="exactly one"):
        RetryAfter(at=at, delay=1)
