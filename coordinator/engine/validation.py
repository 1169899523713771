"""What a caller may configure for a job: retry policy, timeouts, a category scope.

Every retry policy and timeout is checked before it is stored (enqueue,
batch enqueue, job-type defaults), so the rules that compute with them never
meet NaN, infinities or numbers outside the store's columns. The bounds are
documented in ``protos/workflowjobs/v1/job.proto`` and ``docs/limits.md``.
A violation is ``InvalidArgument`` naming the field.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from coordinator.errors import InvalidArgument
from coordinator.ids import is_valid_id
from coordinator.model import MAX_ATTEMPTS, JobCategory, RetryPolicy, parse_category
from workflowjobs.contract import (
    LONGEST_BACKOFF_DAYS,
    LONGEST_BACKOFF_MS,
    LONGEST_SPAN_DAYS,
    LONGEST_SPAN_MS,
    MAX_TEXT_LENGTH,
)

# Largest backoff_multiplier: 100 ** n passes any max_backoff within a few attempts.
MAX_BACKOFF_MULTIPLIER = 100.0
# Longest initial_backoff / max_backoff (the engine's backoff ceiling).
MAX_BACKOFF_MS = LONGEST_BACKOFF_MS
# Longest execution_timeout / heartbeat_timeout.
MAX_TIMEOUT_MS = LONGEST_SPAN_MS
# Most entries in non_retryable_error_kinds.
MAX_NON_RETRYABLE_KINDS = 100


def check_job_type_name(name: str, field: str) -> None:
    """A job type name lists as itself: the CLI and the dashboard take job types
    comma-separated and trim each, so a name may hold no comma and may not start
    or end with whitespace."""
    if "," in name:
        raise InvalidArgument(
            f"{field} {name[:80]!r} contains ','; job type names may not contain commas "
            "(the CLI and the dashboard take comma-separated lists of them)"
        )
    if name != name.strip():
        raise InvalidArgument(
            f"{field} {name[:80]!r} starts or ends with whitespace; job type names may not"
        )


# Most characters of free text: an operator's reason, a failure's error
# message (kept cut to it), a release's reason.


def check_length(value: str, field: str, limit: int) -> None:
    """Raise ``InvalidArgument`` naming ``field`` when ``value`` has more than ``limit`` characters.

    The value itself is not echoed: a long one would make the answer's status
    message (a header) too large to deliver.
    """
    if len(value) > limit:
        raise InvalidArgument(f"{field} is {len(value):,} characters long; the limit is {limit}")


def keep_head(text: str, limit: int = MAX_TEXT_LENGTH) -> str:
    """``text``, or its first ``limit`` characters and a note saying how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]} [{len(text) - limit:,} more characters cut]"


def keep_tail(text: str, limit: int) -> str:
    """``text``, or its last ``limit`` UTF-8 bytes after a line saying how much was cut.

    The end of a traceback names the error and the innermost frames, so that is
    the part worth keeping.
    """
    data = text.encode("utf-8")
    if len(data) <= limit:
        return text
    tail = data[-limit:].decode("utf-8", errors="ignore")
    return f"[{len(data) - len(tail.encode('utf-8'))} earlier bytes cut]\n{tail}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_retry_policy(policy: RetryPolicy, field: str, max_string_length: int) -> None:
    """Raise ``InvalidArgument`` naming ``field.<name>`` unless every set value is in bounds."""
    if policy.max_attempts is not None and (
        not _is_int(policy.max_attempts) or not 1 <= policy.max_attempts <= MAX_ATTEMPTS
    ):
        raise InvalidArgument(
            f"{field}.max_attempts must be between 1 and {MAX_ATTEMPTS:,} "
            f"(0 or unset: the default), got {policy.max_attempts}"
        )
    for name in ("initial_backoff_ms", "max_backoff_ms"):
        value = getattr(policy, name)
        if value is not None and (not _is_int(value) or not 0 <= value <= MAX_BACKOFF_MS):
            raise InvalidArgument(
                f"{field}.{name.removesuffix('_ms')} must be between 0 and "
                f"{LONGEST_BACKOFF_DAYS} days, got {value} ms"
            )
    multiplier = policy.backoff_multiplier
    if multiplier is not None and (
        not _is_number(multiplier)
        or not math.isfinite(multiplier)
        or not 1.0 <= multiplier <= MAX_BACKOFF_MULTIPLIER
    ):
        raise InvalidArgument(
            f"{field}.backoff_multiplier must be a finite number between 1 and "
            f"{MAX_BACKOFF_MULTIPLIER:g} (0 or unset: the default), got {multiplier}"
        )
    jitter = policy.jitter
    if jitter is not None and (
        not _is_number(jitter) or not math.isfinite(jitter) or not 0.0 <= jitter <= 1.0
    ):
        raise InvalidArgument(f"{field}.jitter must be between 0 and 1, got {jitter}")
    kinds = policy.non_retryable_error_kinds
    if len(kinds) > MAX_NON_RETRYABLE_KINDS:
        raise InvalidArgument(
            f"{field}.non_retryable_error_kinds lists {len(kinds)} kinds; "
            f"the limit is {MAX_NON_RETRYABLE_KINDS}"
        )
    for kind in kinds:
        if not kind or len(kind) > max_string_length:
            raise InvalidArgument(
                f"{field}.non_retryable_error_kinds entries must be 1 to "
                f"{max_string_length} characters"
            )


def check_timeout(value: int | None, field: str) -> None:
    """Raise ``InvalidArgument`` unless ``value`` (ms) is unset or in [0, the longest span]."""
    if value is not None and (not _is_int(value) or not 0 <= value <= MAX_TIMEOUT_MS):
        raise InvalidArgument(
            f"{field} must be between 0 and {LONGEST_SPAN_DAYS} days, got {value} ms"
        )


def category_value(text: str) -> str:
    """A category named in a pause or limit, as stored: its number as text ("3").

    Accepts the number, the name in any case or the proto name; anything else
    (UNSPECIFIED included) is ``InvalidArgument`` listing the names.
    """
    category = parse_category(text)
    if category is None or category == JobCategory.UNSPECIFIED:
        names = ", ".join(c.label for c in JobCategory if c != JobCategory.UNSPECIFIED)
        raise InvalidArgument(
            f"value {text[:80]!r} is not a job category; use one of {names} (or its number)"
        )
    return str(int(category))


def check_id(job_id: str) -> None:
    if not job_id:
        raise InvalidArgument("job_id is required")
    if not is_valid_id(job_id):
        raise InvalidArgument(
            f"job_id {job_id[:80]!r} is malformed; job ids are lower-case UUIDs "
            "like 0190b6e2-5c1a-7d3e-8f00-123456789abc"
        )


def check_refs(refs: Sequence[tuple[str, str]], max_batch_size: int) -> None:
    """(job id, lease token) pairs of a heartbeat or report: at most
    ``max_batch_size``, each id well formed, each token given."""
    if len(refs) > max_batch_size:
        raise InvalidArgument(f"{len(refs)} entries exceed the batch limit of {max_batch_size}")
    for job_id, token in refs:
        check_id(job_id)
        if not token:
            raise InvalidArgument(f"lease_token is required for job {job_id}")


__all__ = [
    "MAX_BACKOFF_MS",
    "MAX_BACKOFF_MULTIPLIER",
    "MAX_NON_RETRYABLE_KINDS",
    "MAX_TEXT_LENGTH",
    "MAX_TIMEOUT_MS",
    "check_id",
    "check_length",
    "check_refs",
    "check_retry_policy",
    "check_timeout",
    "keep_head",
]
