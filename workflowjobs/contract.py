"""The contract's numbers: the bounds and status sets every side checks alike.

The coordinator refuses a request outside these bounds; the SDK, the CLI, the
dashboard and the ingress adapters check the same numbers first, so a caller
hears of a mistake before a round trip and in the same words. Each number is
decided here once. The proto comments and docs quote them, and
``tests/unit/test_contract.py`` holds those texts to these values.

Status sets are proto numbers (``workflowjobs.v1.JobStatus``), so the
coordinator's ``JobStatus`` enum, the SDK's views and raw protobuf all read
them without a table.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from workflowjobs.v1 import job_pb2

# The longest span the protocol takes: execution and heartbeat timeouts, a rate
# limit's period, a push-back's retry_after, a schedule tick's misfire grace, a
# uniqueness period, a debounce delay and max wait.
LONGEST_SPAN_DAYS = 366
LONGEST_SPAN = timedelta(days=LONGEST_SPAN_DAYS)
LONGEST_SPAN_S = LONGEST_SPAN_DAYS * 86_400
LONGEST_SPAN_MS = LONGEST_SPAN_S * 1000
LONGEST_SPAN_US = LONGEST_SPAN_MS * 1000

# The longest backoff of a retry policy (initial_backoff, max_backoff) and the
# most any computed backoff waits, whatever a policy says.
LONGEST_BACKOFF_DAYS = 365
LONGEST_BACKOFF_S = LONGEST_BACKOFF_DAYS * 86_400
LONGEST_BACKOFF_MS = LONGEST_BACKOFF_S * 1000

# The range of the protocol's 32-bit integers (priority, max_attempts, limits,
# weights, page sizes).
INT32_MIN = -(2**31)
INT32_MAX = 2**31 - 1

# The latest time a timestamp may name (a due time, a pause's expiry): the
# last second of the year 9999 in UTC, the end of RFC 3339's range.
LATEST_YEAR = 9999
LATEST_TIME = datetime(LATEST_YEAR, 12, 31, 23, 59, 59, tzinfo=UTC)
LATEST_TIME_US = int(LATEST_TIME.timestamp()) * 1_000_000

# Most of a reported traceback kept with its attempt (UTF-8 bytes; the tail is kept).
MAX_TRACEBACK_BYTES = 16 * 1024
# The longest id, key or name a request may carry unless a coordinator's
# settings lower it (``WFJOBS_MAX_STRING_LENGTH``).
MAX_STRING_LENGTH = 512
# Operator-written free text (a pause's reason, a cancel's reason).
MAX_TEXT_LENGTH = 4096
# The largest payload a job may carry unless a coordinator's settings change it
# (``WFJOBS_MAX_PAYLOAD_BYTES``).
MAX_PAYLOAD_BYTES = 1024 * 1024
# The largest gRPC message either side sends or receives.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024

# Statuses of a job that has not ended: it may still run (what a cancel applies
# to, what a uniqueness key holds while by default, what keeps a group open).
LIVE_STATUSES: tuple[int, ...] = (job_pb2.JOB_STATUS_PENDING, job_pb2.JOB_STATUS_RUNNING)
# Statuses a job ends in; it changes again only by an operator's retry or replay.
FINAL_STATUSES: tuple[int, ...] = (
    job_pb2.JOB_STATUS_COMPLETED,
    job_pb2.JOB_STATUS_FAULTED,
    job_pb2.JOB_STATUS_CANCELLED,
)


__all__ = [
    "FINAL_STATUSES",
    "INT32_MAX",
    "INT32_MIN",
    "LATEST_TIME",
    "LATEST_TIME_US",
    "LATEST_YEAR",
    "LONGEST_BACKOFF_DAYS",
    "LONGEST_BACKOFF_MS",
    "LONGEST_BACKOFF_S",
    "LIVE_STATUSES",
    "LONGEST_SPAN",
    "LONGEST_SPAN_DAYS",
    "LONGEST_SPAN_MS",
    "LONGEST_SPAN_S",
    "LONGEST_SPAN_US",
    "MAX_MESSAGE_BYTES",
    "MAX_PAYLOAD_BYTES",
    "MAX_STRING_LENGTH",
    "MAX_TEXT_LENGTH",
    "MAX_TRACEBACK_BYTES",
]
