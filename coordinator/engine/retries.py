"""Retry rules: what happens to a job when one of its attempts fails.

A failed attempt is retried with exponential backoff and jitter, capped, until
``max_attempts`` attempts have run; then the job is FAULTED (the dead-letter
set). A non-retryable failure, or an error kind the policy lists as
non-retryable, faults it at once. A handler may name the retry time itself.
"""

from __future__ import annotations

import random

from coordinator.model import (
    DEFAULT_RETRY_POLICY,
    AttemptEnd,
    AttemptOutcome,
    JobStatus,
    LeasedForFailure,
    RetryPolicy,
)


def backoff_ms(policy: RetryPolicy, attempt: int, rng: random.Random) -> int:
    """Delay before the attempt after ``attempt`` (1-based) failed."""
    p = policy.merged_over(DEFAULT_RETRY_POLICY)
    assert p.initial_backoff_ms is not None and p.backoff_multiplier is not None
    assert p.max_backoff_ms is not None and p.jitter is not None
    base = min(p.initial_backoff_ms * p.backoff_multiplier ** max(attempt - 1, 0), p.max_backoff_ms)
    spread = base * min(max(p.jitter, 0.0), 1.0)
    return max(0, int(base - spread + rng.random() * 2 * spread))


def decide_failure(
    row: LeasedForFailure,
    *,
    now: int,
    error: str,
    error_kind: str,
    non_retryable: bool,
    retry_at: int | None,
    outcome: AttemptOutcome,
    rng: random.Random,
) -> AttemptEnd:
    """The fate of a job whose running attempt just failed."""
    if row.cancel_requested:
        return AttemptEnd(
            job_id=row.id,
            outcome=AttemptOutcome.CANCELLED,
            new_status=JobStatus.CANCELLED,
            error=error or "cancelled",
            error_kind=error_kind or None,
        )
    policy = RetryPolicy.from_json(row.retry_policy)
    fatal_kind = bool(error_kind) and error_kind in policy.non_retryable_error_kinds
    if non_retryable or fatal_kind or row.attempt >= row.max_attempts:
        return AttemptEnd(
            job_id=row.id,
            outcome=outcome,
            new_status=JobStatus.FAULTED,
            error=error,
            error_kind=error_kind or None,
        )
    due = retry_at if retry_at is not None else now + backoff_ms(policy, row.attempt, rng) * 1000
    return AttemptEnd(
        job_id=row.id,
        outcome=outcome,
        new_status=JobStatus.PENDING,
        due_at=max(due, now),
        error=error,
        error_kind=error_kind or None,
    )
