"""Retry rules: what happens to a job when one of its attempts fails.

A failed attempt is retried with exponential backoff and jitter, capped, until
``max_attempts`` attempts have run; then the job is FAULTED (the dead-letter
set). A non-retryable failure, or an error kind the policy lists as
non-retryable, faults it at once. A handler may name the retry time itself.

The backoff is total: whatever a stored policy holds (NaN, infinities,
negative or huge numbers, values of the wrong type, an attempt number in the
billions), ``backoff_ms`` returns a delay between 0 and the policy's cap, and
the cap itself is at most ``BACKOFF_CEILING_MS``. A field that is not a usable
number falls back to the default policy's value. The API validates policies
before they are stored; this is the engine's own guard for rows that were not.
"""

from __future__ import annotations

import math
import random

from coordinator.model import (
    DEFAULT_RETRY_POLICY,
    AttemptEnd,
    AttemptOutcome,
    JobStatus,
    LeasedForFailure,
    RetryPolicy,
    at_attempt_ceiling,
)
from workflowjobs.contract import LONGEST_BACKOFF_MS

# Longest backoff ever computed, whatever a policy's max_backoff says, so a due
# time is always ``now`` plus a bounded delay.
BACKOFF_CEILING_MS = LONGEST_BACKOFF_MS
_MAX_EXPONENT = 2**31


def _finite(value: object, default: float) -> float:
    """``value`` as a finite number >= 0, ``default`` when it is not a number or NaN.

    Positive infinity becomes the ceiling; negative numbers become 0.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return default
    number = float(value)
    if math.isnan(number):
        return default
    return min(max(number, 0.0), float(BACKOFF_CEILING_MS))


def backoff_ms(policy: RetryPolicy, attempt: int, rng: random.Random) -> int:
    """Delay before the attempt after ``attempt`` (1-based) failed, in [0, cap]."""
    d = DEFAULT_RETRY_POLICY
    assert d.initial_backoff_ms is not None and d.backoff_multiplier is not None
    assert d.max_backoff_ms is not None and d.jitter is not None
    p = policy.merged_over(d)
    cap = _finite(p.max_backoff_ms, d.max_backoff_ms)
    initial = min(_finite(p.initial_backoff_ms, d.initial_backoff_ms), cap)
    multiplier = _finite(p.backoff_multiplier, d.backoff_multiplier)
    jitter = min(_finite(p.jitter, d.jitter), 1.0)
    # Attempt numbers are stored as 32-bit integers; past that the cap is long reached.
    exponent = min(max(attempt - 1, 0), _MAX_EXPONENT) if isinstance(attempt, int) else 0
    if initial <= 0 or cap <= 0:
        base = 0.0
    elif multiplier <= 1.0 or exponent == 0:
        base = initial * multiplier**exponent  # never grows, so cannot overflow
    elif math.log(initial) + exponent * math.log(multiplier) >= math.log(cap):
        base = cap  # compared in log space: multiplier ** exponent may not fit a float
    else:
        base = min(initial * multiplier**exponent, cap)
    # The formula of the RetryPolicy comment in job.proto: jitter only shortens.
    delay = base * (1 - jitter * rng.random())
    return int(min(max(delay, 0.0), cap))


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
    if (
        non_retryable
        or fatal_kind
        or row.counted_attempts >= row.max_attempts
        or at_attempt_ceiling(row.attempt)
    ):
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
