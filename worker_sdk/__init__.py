"""workflow-jobs worker SDK: run handlers for jobs, enqueue jobs, operate the engine.

A worker in about ten lines::

    from dataclasses import dataclass
    from worker_sdk import JobContext, Worker

    @dataclass
    class Invoice:
        id: str
        amount_cents: int

    worker = Worker("127.0.0.1:50051", concurrency=50)

    @worker.handler("invoice.charge")
    async def charge(invoice: Invoice, ctx: JobContext) -> dict:
        ctx.logger.info("charging %s", invoice.id)
        return {"charged": invoice.amount_cents}

    worker.run()

Enqueue with :class:`SchedulerClient` (or :class:`AsyncSchedulerClient`),
operate with :class:`AdminClient`, and unit-test handlers with
:func:`worker_sdk.testing.run_handler`.
"""

from ._admin import AdminClient
from ._admin_types import (
    LIMIT_SCOPE_KINDS,
    PAUSE_SCOPE_KINDS,
    Backlog,
    BulkResult,
    CategoryWeight,
    CategoryWeights,
    ConcurrencyLimit,
    GroupPage,
    Identity,
    JobExplanation,
    JobFilter,
    JobPage,
    JobStats,
    JobTypeDefaults,
    LimitKind,
    PauseKind,
    PauseRecord,
    PauseScope,
    PurgeResult,
    RateLimit,
    StatusCount,
    TenantWeight,
    TenantWeights,
    UniqueKey,
    UniqueKeyRule,
    WaitReason,
    WaitReasonKind,
    WindowCounts,
    WorkerView,
    category_name,
    pause_scope,
    pause_scope_text,
)
from ._codec import (
    BYTES_CONTENT_TYPE,
    JSON_CONTENT_TYPE,
    PROTOBUF_CONTENT_TYPE,
    decode_payload,
    encode_payload,
)
from ._connection import ConfigError, ConnectionSettings, resolve_connection
from ._context import CancelReason, CancelSignal, JobContext, current_job
from ._convert import (
    GroupView,
    JobAttemptView,
    JobCategory,
    JobRequest,
    JobStatus,
    JobView,
    RetryPolicy,
    Uniqueness,
    WorkflowRef,
)
from ._errors import (
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    InvalidArgumentError,
    JobNotFoundError,
    LeaseLostError,
    NonRetryableError,
    OutOfRangeError,
    PayloadDecodeError,
    PayloadEncodeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    RetryAfter,
    Throttled,
    UnauthenticatedError,
    UnavailableError,
    WorkflowJobsError,
    error_from_rpc,
)
from ._events import AsyncEventWatch, EventWatch, JobEvent, JobEventFilter, JobEventKind
from ._inline import (
    ContinueAs,
    HandOff,
    InlineJobContext,
    InlineResult,
    InlineRunner,
    InlineStatus,
    JobPausedError,
)
from ._results import JobFailedError, aenqueue_and_wait, enqueue_and_wait, job_outcome
from ._scheduler import AsyncSchedulerClient, EnqueueResult, SchedulerClient
from ._version import __version__
from ._worker import Worker

__all__ = [
    "BYTES_CONTENT_TYPE",
    "JSON_CONTENT_TYPE",
    "LIMIT_SCOPE_KINDS",
    "PAUSE_SCOPE_KINDS",
    "PROTOBUF_CONTENT_TYPE",
    "AdminClient",
    "AlreadyExistsError",
    "AsyncEventWatch",
    "AsyncSchedulerClient",
    "Backlog",
    "BulkResult",
    "CancelReason",
    "CancelSignal",
    "CategoryWeight",
    "CategoryWeights",
    "ConcurrencyLimit",
    "ConfigError",
    "ConnectionSettings",
    "ContinueAs",
    "DeadlineExceededError",
    "EnqueueResult",
    "EventWatch",
    "FailedPreconditionError",
    "GroupPage",
    "GroupView",
    "HandOff",
    "Identity",
    "InlineJobContext",
    "InlineResult",
    "InlineRunner",
    "InlineStatus",
    "InvalidArgumentError",
    "JobAttemptView",
    "JobCategory",
    "JobContext",
    "JobEvent",
    "JobEventFilter",
    "JobEventKind",
    "JobExplanation",
    "JobFailedError",
    "JobFilter",
    "JobNotFoundError",
    "JobPage",
    "JobPausedError",
    "JobRequest",
    "JobStats",
    "JobStatus",
    "JobTypeDefaults",
    "JobView",
    "LeaseLostError",
    "LimitKind",
    "NonRetryableError",
    "OutOfRangeError",
    "PayloadDecodeError",
    "PauseKind",
    "PauseRecord",
    "PauseScope",
    "PurgeResult",
    "PayloadEncodeError",
    "PermissionDeniedError",
    "RateLimit",
    "ResourceExhaustedError",
    "RetryAfter",
    "TenantWeight",
    "TenantWeights",
    "Throttled",
    "RetryPolicy",
    "SchedulerClient",
    "StatusCount",
    "UnauthenticatedError",
    "UnavailableError",
    "UniqueKey",
    "UniqueKeyRule",
    "Uniqueness",
    "WaitReason",
    "WaitReasonKind",
    "WindowCounts",
    "Worker",
    "WorkerView",
    "WorkflowJobsError",
    "WorkflowRef",
    "__version__",
    "aenqueue_and_wait",
    "category_name",
    "current_job",
    "decode_payload",
    "encode_payload",
    "enqueue_and_wait",
    "error_from_rpc",
    "job_outcome",
    "pause_scope",
    "pause_scope_text",
    "resolve_connection",
]
