"""Inline execution: run a job now, in the caller's process, recorded and leased like any other.

Design note
-----------
An inline run is one ``Enqueue`` with ``inline`` set: the coordinator stores the
job already ``RUNNING`` and leased to the caller, in the same transaction as the
insert, so no remote worker can take it first. The caller then behaves exactly
like a worker holding that one lease:

* the handler runs through the worker's own execution path
  (:func:`worker_sdk._execution.run_attempt`: payload decoding, execution
  timeout, blocking handlers in a thread pool with the context variables copied
  in, errors mapped to failures with the handler's retry policy, span and
  metrics), with an :class:`InlineJobContext`;
* a :class:`~worker_sdk._heartbeat.Heartbeater` renews the lease while the
  handler runs and until the outcome is recorded; ``LOST`` and
  ``CANCEL_REQUESTED`` answers set the context's cancel signal;
* with tracing on, the ``Enqueue`` runs in an ``enqueue <job type>`` span whose
  context becomes the job's traceparent (a hand-off is recorded on the
  ``execute`` span as a release, a continuation as a completion);
* ``ctx.enqueue`` / ``ctx.enqueue_async`` enqueue child jobs as on a worker
  (parent id, inherited tenant and workflow refs, dedupe per parent key), over
  the runner's channel with its credential;
* the outcome goes through ``ReportOutcomes`` like a worker's, and the caller
  waits for the answer, so an :class:`InlineResult` always says what the
  coordinator recorded.

If the caller dies mid-run nothing is lost: the lease expires, the attempt is
recorded as ``LEASE_EXPIRED`` and a remote worker serving the job type runs the
job by its retry policy.

Hand-offs (mixed mode) end the inline part early:

* **release**: ``ctx.hand_off(checkpoint)`` (or ``raise HandOff(...)``) reports a
  ``Release`` carrying the checkpoint as the job's new payload. The job is
  ``PENDING`` again, the attempt does not count, and a remote worker runs the
  same handler on the checkpoint.
* **continuation**: ``ctx.continue_as(job_type, payload)`` enqueues a new job
  (category ``CONTINUATION``, the same tenant, workflow context, priority and
  W3C trace context, idempotency key ``<job id>/continuation``) and then
  completes the current job with ``{"continued_as": <id>}``. A crash between
  the two leaves the continuation enqueued and the current job to be retried;
  a retry that continues again gets the same continuation back (same key).
* **time budget**: with ``budget=``, the context's cancel signal is set when
  the budget runs out (reason ``inline time budget exhausted``) and, after
  ``budget_grace``, the inline part is cancelled and the job released with the
  latest ``ctx.checkpoint(...)`` value (or its original payload). A blocking
  handler cannot be interrupted: its job is released all the same and its
  result ignored, as at worker shutdown.

Sync callers (``run_sync``) share one background event loop per runner; the
handler runs there (async handlers) or in the runner's thread pool (blocking
handlers), in a copy of the caller's context variables.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import enum
import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NoReturn

import grpc

from workflowjobs.v1 import (
    scheduler_service_pb2,
    scheduler_service_pb2_grpc,
    worker_service_pb2,
    worker_service_pb2_grpc,
)

from . import _tracing
from ._backoff import RETRYABLE_CODES, Backoff, BackoffConfig
from ._codec import encode_payload
from ._context import (
    NO_CHECKPOINT,
    CancelReason,
    JobContext,
)
from ._convert import JobCategory, JobRequest, JobStatus, JobView, from_timestamp
from ._errors import (
    FailedPreconditionError,
    LeaseLostError,
    PayloadEncodeError,
    WorkflowJobsError,
    error_for_status,
    error_from_rpc,
)
from ._execution import Attempt, Outcome, release, run_attempt
from ._handler import HandlerSpec
from ._heartbeat import Heartbeater
from ._results import job_outcome
from ._scheduler import AsyncSchedulerClient
from ._transport import ChannelConfig
from ._worker import Worker, channel_config_of, handler_of

__all__ = [
    "ContinueAs",
    "HandOff",
    "InlineJobContext",
    "InlineResult",
    "InlineRunner",
    "InlineStatus",
    "JobPausedError",
]

logger = logging.getLogger("worker_sdk.inline")

CALLER_CANCELLED = "inline caller cancelled"

# Outcome reports and continuation enqueues retried while the coordinator is away.
_CALL_BACKOFF = BackoffConfig(initial=0.05, maximum=5.0, jitter=0.5)


class JobPausedError(FailedPreconditionError):
    """An inline run was refused: the job's tenant, definition, instance or type is paused.

    Nothing was stored. Retry after the unpause, or pass ``if_paused="queue"``
    to store the job ``PENDING`` for distributed workers instead.
    """


class HandOff(Exception):  # noqa: N818 - a request, like asyncio.CancelledError
    """Raised by an inline handler to release its job to distributed workers.

    ``ctx.hand_off(...)`` raises it; raising it directly works the same.

    Args:
        checkpoint: The job's new payload (a value of the handler's payload
            type); by default the latest ``ctx.checkpoint(...)`` value, else the
            original payload is kept.
        reason: Recorded as the released attempt's note.
    """

    def __init__(self, checkpoint: Any = NO_CHECKPOINT, *, reason: str = "") -> None:
        self.checkpoint = checkpoint
        self.reason = reason or "handed off to distributed workers"
        super().__init__(self.reason)


class ContinueAs(Exception):  # noqa: N818 - a request, like asyncio.CancelledError
    """Raised by an inline handler to continue as a new job on distributed workers.

    ``ctx.continue_as(...)`` raises it; raising it directly works the same.

    Args:
        job_type: The continuation's job type.
        payload: Its input.
        **options: Other :class:`~worker_sdk.JobRequest` fields; by default the
            continuation has the current job's tenant, workflow context,
            priority and trace context, category ``CONTINUATION`` and the
            idempotency key ``<current job id>/continuation``.
    """

    def __init__(self, job_type: str, payload: Any = None, **options: Any) -> None:
        if not job_type:
            raise ValueError("continue_as needs a job type")
        self.job_type = job_type
        self.payload = payload
        self.options = options
        super().__init__(f"continue as {job_type}")


class InlineJobContext(JobContext):
    """The :class:`~worker_sdk.JobContext` of an inline attempt: it can hand off.

    Built by :class:`InlineRunner`; handlers keep annotating ``JobContext``
    and branch on :attr:`is_inline`.
    """

    def __init__(self, *, budget: timedelta | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.budget_deadline: datetime | None = self.start_time + budget if budget else None
        """When the inline time budget runs out, or None without a budget."""
        self._requested: HandOff | ContinueAs | None = None

    @property
    def is_inline(self) -> bool:
        """Always True: this attempt runs in the enqueuer's process."""
        return True

    @property
    def budget_remaining(self) -> timedelta | None:
        """Time left of the inline budget (never negative), or None without a budget."""
        if self.budget_deadline is None:
            return None
        return max(timedelta(0), self.budget_deadline - datetime.now(UTC))

    def hand_off(self, checkpoint: Any = NO_CHECKPOINT, *, reason: str = "") -> NoReturn:
        """End the inline part now and release the job to distributed workers.

        The job goes back to ``PENDING`` (the attempt does not count) with
        ``checkpoint`` as its payload, and a remote worker runs the same
        handler on it.

        Args:
            checkpoint: The job's new payload, of the handler's payload type;
                defaults to the latest :meth:`checkpoint` value, else the
                original payload.
            reason: Recorded with the released attempt.

        Raises:
            HandOff: Always; let it propagate out of the handler.
        """
        raise HandOff(checkpoint, reason=reason)

    def continue_as(self, job_type: str, payload: Any = None, **options: Any) -> NoReturn:
        """End the inline part now: enqueue a continuation job and complete this one.

        The continuation carries this job's workflow context and trace context
        (see :class:`ContinueAs` for the defaults); this job completes with
        ``{"continued_as": <continuation id>}`` as its result.

        Args:
            job_type: The continuation's job type.
            payload: Its input.
            **options: Other :class:`~worker_sdk.JobRequest` fields.

        Raises:
            ContinueAs: Always; let it propagate out of the handler.
        """
        raise ContinueAs(job_type, payload, **options)


class InlineStatus(enum.StrEnum):
    """How an inline run ended, from the caller's point of view."""

    COMPLETED = "completed"
    """The handler returned; ``value`` is its result."""
    FAILED = "failed"
    """The handler failed; ``job_status`` tells whether a retry is scheduled (PENDING) or not."""
    CANCELLED = "cancelled"
    """An operator cancelled the job while it ran."""
    HANDED_OFF = "handed_off"
    """Released to distributed workers, or continued as ``continuation_job_id``."""
    QUEUED = "queued"
    """Not run inline: stored for distributed workers (paused scope with
    ``if_paused="queue"``, or an existing job with the same idempotency key)."""


@dataclasses.dataclass(frozen=True, slots=True)
class InlineResult:
    """What an inline run did.

    Attributes:
        status: How it ended (see :class:`InlineStatus`).
        job_id: The job's id.
        job_status: The job's status after the recorded outcome (``PENDING``
            after a release or a scheduled retry).
        value: The handler's return value (``COMPLETED``), or the decoded
            result of an existing finished job (deduplicated).
        error: The error text of a failed attempt.
        exception: The exception the handler raised, when it ran here.
        reason: Why the job was handed off (``HANDED_OFF``).
        continuation_job_id: The continuation's id (``HANDED_OFF`` by ``continue_as``).
        deduplicated: An existing job with the same idempotency key was returned.
        attempt: The attempt number that ran inline (0 when none did).
    """

    status: InlineStatus
    job_id: str
    job_status: JobStatus
    value: Any = None
    error: str = ""
    exception: BaseException | None = dataclasses.field(default=None, repr=False)
    reason: str = ""
    continuation_job_id: str = ""
    deduplicated: bool = False
    attempt: int = 0

    @property
    def follow_job_id(self) -> str:
        """The job whose outcome finishes the work: the continuation, else this job."""
        return self.continuation_job_id or self.job_id

    @property
    def finished(self) -> bool:
        """True when nothing is left for distributed workers (completed, failed for good, or cancelled)."""
        return self.job_status.is_terminal and not self.continuation_job_id


@dataclasses.dataclass(eq=False)
class _Connection:
    channel: grpc.aio.Channel
    scheduler: scheduler_service_pb2_grpc.JobSchedulerServiceStub
    worker: worker_service_pb2_grpc.WorkerServiceStub


class _InlineAttempt:
    """One inline attempt: its lease, heartbeats, handler task and timers."""

    def __init__(self, running: Attempt, cancel_grace: float) -> None:
        self.running = running
        self.ctx: InlineJobContext = running.ctx  # type: ignore[assignment]
        self.cancel_grace = cancel_grace
        self.task: asyncio.Task[Any] | None = None
        self.holding = True
        self.ref = worker_service_pb2.LeaseRef(
            job_id=running.leased.job.id, lease_token=running.leased.lease_token
        )

    def leases(self) -> list[worker_service_pb2.LeaseRef]:
        return [self.ref] if self.holding and not self.ctx.lease_lost else []

    def on_status(
        self, ref: worker_service_pb2.LeaseRef, status: worker_service_pb2.LeaseStatus
    ) -> None:
        ctx = self.ctx
        if status.state == worker_service_pb2.LEASE_STATE_EXTENDED:
            expire = from_timestamp(status.lease_expire_time)
            if expire is not None:
                ctx.lease_expire_time = expire
        elif status.state == worker_service_pb2.LEASE_STATE_LOST:
            if not ctx.is_cancelled():
                ctx.logger.warning("lease of inline job %s lost", ctx.job_id)
            _tracing.event(self.running.span, "lease lost")
            ctx._cancel(CancelReason.LEASE_LOST)
        elif status.state == worker_service_pb2.LEASE_STATE_CANCEL_REQUESTED:
            if self.running.cancel_reason is None:
                ctx.logger.info("cancel requested for inline job %s", ctx.job_id)
                _tracing.event(self.running.span, "cancel requested")
                self.running.cancel_reason = CancelReason.CANCEL_REQUESTED
                ctx._cancel(CancelReason.CANCEL_REQUESTED)
                handler = self.running.handler
                if handler is not None and handler.is_async:
                    self.later(self.cancel_grace, self.cancel_task)

    def stop_early(self, reason: str, grace: float) -> None:
        """Set the cancel signal now and cancel the handler after ``grace`` seconds."""
        if self.task is None or self.task.done() or self.running.cancel_reason is not None:
            return
        self.running.cancel_reason = reason
        self.ctx._cancel(reason)
        if grace > 0:
            self.later(grace, self.cancel_task)
        else:
            self.cancel_task()

    def cancel_task(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()

    def later(self, delay: float, callback: Callable[[], None]) -> None:
        loop = asyncio.get_running_loop()
        self.running.timers.append(loop.call_later(max(0.0, delay), callback))

    def cancel_timers(self) -> None:
        for timer in self.running.timers:
            timer.cancel()


def _wrap_for_inline(spec: HandlerSpec, ctx: InlineJobContext) -> HandlerSpec:
    """The handler, noting on ``ctx`` the hand-off it asked for."""
    func = spec.func
    if spec.is_async:

        async def call_async(**kwargs: Any) -> Any:
            try:
                return await func(**kwargs)
            except (HandOff, ContinueAs) as request:
                ctx._requested = request
                return None

        return dataclasses.replace(spec, func=call_async)

    def call(**kwargs: Any) -> Any:
        try:
            return func(**kwargs)
        except (HandOff, ContinueAs) as request:
            ctx._requested = request
            return None

    return dataclasses.replace(spec, func=call)


def _to_seconds(value: timedelta | float | None) -> float | None:
    if value is None:
        return None
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class InlineRunner:
    """Runs jobs inline: now, in this process, recorded and leased like any other job.

    ::

        runner = InlineRunner("coordinator:50051")

        @runner.handler("quote.price")
        async def price(request: QuoteRequest, ctx: JobContext) -> Quote:
            ...

        result = await runner.run("quote.price", QuoteRequest(...), budget=timedelta(seconds=2))
        if result.status == "completed":
            return result.value
        # handed off: a remote worker finishes it; result.follow_job_id to wait on

    A remote worker with a handler for the same job type takes over when the
    caller dies mid-run or hands off, so register the same handler there
    (passing that :class:`~worker_sdk.Worker` here shares its handlers and
    connection settings).

    Args:
        target: ``host:port`` of the coordinator, or a :class:`~worker_sdk.Worker`
            whose handlers and connection settings to use (it need not run);
            None: the settings ``wfjobs`` reads (``WFJOBS_TARGET``, the profile).
        worker_id: Lease owner recorded for inline attempts; generated when None.
        credentials: TLS/mTLS channel credentials (when ``target`` is an address).
        token: Bearer token (when ``target`` is an address).
        metadata: Extra metadata sent with every call (when ``target`` is an address).
        channel_options: Extra gRPC channel options (when ``target`` is an address).
        load_balancing: gRPC load-balancing policy (when ``target`` is an
            address; see :class:`~worker_sdk.Worker`).
        heartbeat_interval: Seconds between lease heartbeats; defaults to a
            third of the lease.
        cancel_grace: Seconds an async handler may keep running after a cancel
            request before its task is cancelled.
        rpc_timeout: Deadline of each call to the coordinator, in seconds.
        report_timeout: How long to keep retrying an outcome (or a
            continuation) while the coordinator is unreachable, in seconds.
        thread_pool_size: Threads for blocking handlers of :meth:`run_sync`.
    """

    def __init__(
        self,
        target: str | Worker | None = None,
        *,
        worker_id: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        channel_options: Sequence[tuple[str, Any]] = (),
        load_balancing: str | None = None,
        heartbeat_interval: float | None = None,
        cancel_grace: float = 5.0,
        rpc_timeout: float = 30.0,
        report_timeout: float = 60.0,
        thread_pool_size: int = 32,
    ) -> None:
        if isinstance(target, Worker):
            self._worker = target
            self._config = channel_config_of(target)
        else:
            self._config = ChannelConfig(
                target,
                credentials=credentials,
                token=token,
                metadata=metadata,
                options=channel_options,
                load_balancing=load_balancing,
            )
            self._worker = Worker(self._config.target)
        self._worker_id = (
            worker_id or f"inline-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        )
        self._heartbeat_interval = heartbeat_interval
        self._cancel_grace = cancel_grace
        self._rpc_timeout = rpc_timeout
        self._report_timeout = report_timeout
        self._thread_pool_size = thread_pool_size
        self._specs: dict[tuple[str, Callable[..., Any]], HandlerSpec] = {}
        self._connections: dict[asyncio.AbstractEventLoop, _Connection] = {}
        self._lock = threading.Lock()
        self._background_loop: asyncio.AbstractEventLoop | None = None
        self._background_thread: threading.Thread | None = None
        self._background_executor: ThreadPoolExecutor | None = None
        self._closed = False

    # -- registration -------------------------------------------------------------------------

    @property
    def worker_id(self) -> str:
        """The lease owner recorded for inline attempts."""
        return self._worker_id

    def handler(self, job_type: str, **options: Any) -> Callable[[Any], Any]:
        """Register the decorated function for ``job_type`` (see :meth:`Worker.handler`)."""
        return self._worker.handler(job_type, **options)

    def register(self, job_type: str, func: Callable[..., Any], **options: Any) -> None:
        """Register ``func`` for ``job_type`` (see :meth:`Worker.register`)."""
        self._worker.register(job_type, func, **options)

    def _handler_spec(self, job_type: str, func: Callable[..., Any] | None) -> HandlerSpec:
        if func is None:
            spec = handler_of(self._worker, job_type)
            if spec is None:
                raise ValueError(
                    f"no handler registered for job type {job_type!r}; register one or pass handler="
                )
            return spec
        key = (job_type, func)
        spec = self._specs.get(key)
        if spec is None:
            spec = self._specs[key] = HandlerSpec.build(job_type, func)
        return spec

    # -- running ------------------------------------------------------------------------------

    async def run(
        self,
        job_type: str,
        payload: Any = None,
        *,
        handler: Callable[..., Any] | None = None,
        budget: timedelta | float | None = None,
        budget_grace: timedelta | float = 0.0,
        if_paused: Literal["refuse", "queue"] = "refuse",
        result_type: Any = Any,
        **options: Any,
    ) -> InlineResult:
        """Enqueue a job leased to this process, run its handler here and report the outcome.

        Args:
            job_type: The job type (a remote worker serving it takes over after
                a crash or a hand-off).
            payload: The job's input (see :meth:`SchedulerClient.enqueue`).
            handler: The function to run; defaults to the handler registered
                for ``job_type``.
            budget: Time the inline part may take; then the job is handed off
                (released with its latest checkpoint).
            budget_grace: Seconds between setting the cancel signal at the end
                of the budget and cancelling the handler, so it can hand off
                itself.
            if_paused: ``"refuse"`` raises :class:`JobPausedError` when the
                job's scope is paused (:class:`FailedPreconditionError` when a
                concurrency limit of its scope is full); ``"queue"`` stores it
                ``PENDING`` for distributed workers and returns a ``QUEUED``
                result.
            result_type: Type to decode an existing job's result into when the
                idempotency key returns a finished job.
            **options: Other :class:`~worker_sdk.JobRequest` fields
                (``tenant_id``, ``workflow``, ``idempotency_key``,
                ``heartbeat_timeout``, …); ``due`` and ``delay`` do not apply.

        Returns:
            What happened; see :class:`InlineResult`.

        Raises:
            JobPausedError: The scope is paused and ``if_paused="refuse"``.
            FailedPreconditionError: A concurrency limit of the scope is full
                and ``if_paused="refuse"``.
            LeaseLostError: The lease was lost while running (the coordinator
                retries the job elsewhere); the outcome was not recorded.
            WorkflowJobsError: The coordinator refused the job or could not be
                reached (then no job exists).
            ValueError: No handler for ``job_type``, or bad options.
        """
        return await self._run(
            job_type,
            payload,
            handler=handler,
            budget=budget,
            budget_grace=budget_grace,
            if_paused=if_paused,
            result_type=result_type,
            options=options,
            caller_context=None,
        )

    def run_sync(
        self,
        job_type: str,
        payload: Any = None,
        *,
        handler: Callable[..., Any] | None = None,
        budget: timedelta | float | None = None,
        budget_grace: timedelta | float = 0.0,
        if_paused: Literal["refuse", "queue"] = "refuse",
        result_type: Any = Any,
        **options: Any,
    ) -> InlineResult:
        """:meth:`run` for plain synchronous code (a WSGI view, a script, a thread).

        The handler runs on the runner's background event loop (async
        handlers) or thread pool (blocking handlers) with a copy of the
        caller's context variables; the caller's thread waits.

        Raises:
            RuntimeError: Called from a thread running an event loop (use ``await run(...)``).
        """
        loop = self._background()
        future = asyncio.run_coroutine_threadsafe(
            self._run(
                job_type,
                payload,
                handler=handler,
                budget=budget,
                budget_grace=budget_grace,
                if_paused=if_paused,
                result_type=result_type,
                options=options,
                caller_context=contextvars.copy_context(),
            ),
            loop,
        )
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def wait(
        self, job: InlineResult | str, *, timeout: float | None = None, result_type: Any = Any
    ) -> Any:
        """Wait for the outcome of a handed-off or queued job and return its result.

        Args:
            job: An :class:`InlineResult` (its :attr:`~InlineResult.follow_job_id`
                is waited on) or a job id.
            timeout: Seconds to wait; None waits as long as it takes.
            result_type: Type to decode the result into.

        Raises:
            JobFailedError: The job ended ``FAULTED`` or ``CANCELLED``.
            DeadlineExceededError: The timeout passed first.
        """
        job_id = job.follow_job_id if isinstance(job, InlineResult) else job
        conn = self._connection()
        client = AsyncSchedulerClient(
            self._config.target,
            channel=conn.channel,
            metadata=self._config.metadata,
            timeout=self._rpc_timeout,
        )
        return job_outcome(await client.wait_for_job(job_id, timeout=timeout), result_type)

    def wait_sync(
        self, job: InlineResult | str, *, timeout: float | None = None, result_type: Any = Any
    ) -> Any:
        """:meth:`wait` for synchronous code."""
        future = asyncio.run_coroutine_threadsafe(
            self.wait(job, timeout=timeout, result_type=result_type), self._background()
        )
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    async def _run(
        self,
        job_type: str,
        payload: Any,
        *,
        handler: Callable[..., Any] | None,
        budget: timedelta | float | None,
        budget_grace: timedelta | float,
        if_paused: str,
        result_type: Any,
        options: dict[str, Any],
        caller_context: contextvars.Context | None,
    ) -> InlineResult:
        if if_paused not in ("refuse", "queue"):
            raise ValueError(f"if_paused must be 'refuse' or 'queue', not {if_paused!r}")
        if options.get("due") is not None or options.get("delay") is not None:
            raise ValueError("an inline job runs now; 'due' and 'delay' do not apply")
        budget_seconds = _to_seconds(budget)
        if budget_seconds is not None and budget_seconds <= 0:
            raise ValueError("budget must be positive")
        spec = self._handler_spec(job_type, handler)
        request = scheduler_service_pb2.EnqueueRequest(
            job=JobRequest(job_type=job_type, payload=payload, **options).to_proto(),
            inline=scheduler_service_pb2.InlineExecution(
                worker_id=self._worker_id, enqueue_if_paused=if_paused == "queue"
            ),
        )
        conn = self._connection()
        with _tracing.enqueue_span(job_type, request.job.tenant_id) as trace_context:
            if trace_context is not None and not request.job.traceparent:
                request.job.traceparent, request.job.tracestate = trace_context
            try:
                response = await conn.scheduler.Enqueue(
                    request,
                    timeout=self._rpc_timeout,
                    metadata=_tracing.outgoing_metadata(self._config.metadata),
                )
            except grpc.aio.AioRpcError as exc:
                raise _enqueue_error(exc) from exc
        if not response.lease_token:
            return _not_run(response, result_type)
        return await self._execute(
            conn,
            spec,
            response,
            budget=timedelta(seconds=budget_seconds) if budget_seconds is not None else None,
            budget_grace=_to_seconds(budget_grace) or 0.0,
            caller_context=caller_context,
        )

    async def _execute(
        self,
        conn: _Connection,
        spec: HandlerSpec,
        response: scheduler_service_pb2.EnqueueResponse,
        *,
        budget: timedelta | None,
        budget_grace: float,
        caller_context: contextvars.Context | None,
    ) -> InlineResult:
        loop = asyncio.get_running_loop()
        job = response.job
        now = datetime.now(UTC)
        expire = from_timestamp(response.lease_expire_time)
        lease_seconds = (expire - now).total_seconds() if expire is not None else 30.0
        heartbeater: Heartbeater | None = None

        def on_context_heartbeat(_ctx: JobContext, _details: Any) -> None:
            if heartbeater is not None and not loop.is_closed():
                loop.call_soon_threadsafe(heartbeater.trigger)

        ctx = InlineJobContext(
            job=job,
            lease_token=response.lease_token,
            lease_expire_time=expire,
            worker_id=self._worker_id,
            heartbeat_callback=on_context_heartbeat,
            start_time=now,
            budget=budget,
            # Child jobs (ctx.enqueue) go over the runner's channel with its credential.
            children=AsyncSchedulerClient(
                self._config.target,
                channel=conn.channel,
                metadata=self._config.metadata,
                timeout=self._rpc_timeout,
            ),
            loop=loop,
        )
        attempt = _InlineAttempt(
            Attempt(
                leased=worker_service_pb2.LeasedJob(
                    job=job,
                    lease_token=response.lease_token,
                    lease_expire_time=response.lease_expire_time,
                ),
                ctx=ctx,
                handler=_wrap_for_inline(spec, ctx),
                lease_duration=lease_seconds,
            ),
            self._cancel_grace,
        )
        interval = self._heartbeat_interval or max(0.25, lease_seconds / 3)
        heartbeater = Heartbeater(
            conn.worker,
            worker_id=self._worker_id,
            leases=attempt.leases,
            on_status=attempt.on_status,
            interval=lambda: interval,
            metadata=self._config.metadata,
            rpc_timeout=min(self._rpc_timeout, max(1.0, lease_seconds / 2)),
        )
        heartbeats = loop.create_task(heartbeater.run(), name=f"inline-heartbeat-{job.id}")
        try:
            outcome = await self._run_handler(attempt, budget, budget_grace, caller_context)
            return await self._settle(conn, attempt, outcome)
        finally:
            attempt.holding = False
            attempt.cancel_timers()
            heartbeats.cancel()
            await asyncio.gather(heartbeats, return_exceptions=True)

    async def _run_handler(
        self,
        attempt: _InlineAttempt,
        budget: timedelta | None,
        budget_grace: float,
        caller_context: contextvars.Context | None,
    ) -> Any:
        loop = asyncio.get_running_loop()
        attempt.task = loop.create_task(
            self._invoke(attempt.running),
            name=f"inline-job-{attempt.ctx.job_id}",
            context=caller_context,
        )
        if budget is not None:
            attempt.later(
                budget.total_seconds(),
                lambda: attempt.stop_early(CancelReason.BUDGET_EXHAUSTED, budget_grace),
            )
        try:
            await asyncio.wait({attempt.task})
        except asyncio.CancelledError:
            # The caller itself was cancelled (a client went away): hand the job back.
            attempt.stop_early(CALLER_CANCELLED, 0.0)
            await asyncio.wait({attempt.task})
            outcome = attempt.task.result()
            if not attempt.ctx.lease_lost:
                conn = self._connection()
                try:
                    await self._report(conn, attempt, self._outcome_message(attempt, outcome))
                except WorkflowJobsError as exc:
                    logger.warning("could not hand back inline job %s: %s", attempt.ctx.job_id, exc)
            raise
        return attempt.task.result()

    async def _invoke(self, running: Attempt) -> Outcome:
        # The worker's own execution path; see the module's design note.
        ctx = running.ctx

        def traced(outcome: Outcome) -> Outcome:
            request = getattr(ctx, "_requested", None)
            if isinstance(request, HandOff):
                return release(request.reason)
            if isinstance(request, ContinueAs):
                return worker_service_pb2.Completion()
            return outcome

        return await run_attempt(running, executor=None, worker_id=self._worker_id, traced=traced)

    def _outcome_message(
        self, attempt: _InlineAttempt, outcome: Any
    ) -> worker_service_pb2.JobOutcome:
        """The outcome to report, with hand-off checkpoints applied."""
        ctx = attempt.ctx
        message = worker_service_pb2.JobOutcome(job_id=ctx.job_id, lease_token=ctx.lease_token)
        if ctx.push_back is not None:
            message.push_back.retry_after.FromTimedelta(ctx.push_back)
        request = ctx._requested
        if isinstance(request, HandOff) or isinstance(outcome, worker_service_pb2.Release):
            reason = request.reason if isinstance(request, HandOff) else outcome.reason
            checkpoint = request.checkpoint if isinstance(request, HandOff) else NO_CHECKPOINT
            if checkpoint is NO_CHECKPOINT:
                checkpoint = ctx.checkpoint_value
            handed_back = release(reason)
            if checkpoint is not NO_CHECKPOINT:
                try:
                    content_type = ctx.content_type if isinstance(checkpoint, bytes) else None
                    handed_back.payload.CopyFrom(encode_payload(checkpoint, content_type))
                except PayloadEncodeError as exc:
                    message.failed.CopyFrom(
                        worker_service_pb2.Failure(
                            error=f"PayloadEncodeError: checkpoint: {exc}",
                            error_kind="PayloadEncodeError",
                            non_retryable=True,
                        )
                    )
                    return message
            message.released.CopyFrom(handed_back)
        elif isinstance(outcome, worker_service_pb2.Completion):
            message.completed.CopyFrom(outcome)
        else:
            message.failed.CopyFrom(outcome)
        return message

    async def _settle(
        self, conn: _Connection, attempt: _InlineAttempt, outcome: Any
    ) -> InlineResult:
        ctx = attempt.ctx
        if ctx.lease_lost:
            error = LeaseLostError(
                grpc.StatusCode.FAILED_PRECONDITION,
                f"lease lost for inline job {ctx.job_id}: the coordinator retries it "
                "elsewhere; its outcome here was not recorded",
            )
            error.job_id = ctx.job_id  # type: ignore[attr-defined]
            raise error
        base: dict[str, Any] = {"job_id": ctx.job_id, "attempt": ctx.attempt}
        request = ctx._requested
        # A cancel requested while the handler ran ends the job CANCELLED whatever it
        # reports, so a continuation it asked for is not enqueued.
        if isinstance(request, ContinueAs) and (
            attempt.running.cancel_reason is not CancelReason.CANCEL_REQUESTED
        ):
            try:
                continuation = await self._enqueue_continuation(conn, ctx, request)
            except WorkflowJobsError as exc:
                failure = worker_service_pb2.Failure(
                    error=f"ContinuationRejected: {exc}", error_kind="ContinuationRejected"
                )
                status = await self._report(
                    conn,
                    attempt,
                    worker_service_pb2.JobOutcome(
                        job_id=ctx.job_id, lease_token=ctx.lease_token, failed=failure
                    ),
                )
                return InlineResult(
                    InlineStatus.FAILED,
                    job_status=status,
                    error=failure.error,
                    exception=exc,
                    **base,
                )
            status = await self._report(
                conn,
                attempt,
                worker_service_pb2.JobOutcome(
                    job_id=ctx.job_id,
                    lease_token=ctx.lease_token,
                    completed=worker_service_pb2.Completion(
                        result=encode_payload({"continued_as": continuation})
                    ),
                ),
            )
            return InlineResult(
                InlineStatus.HANDED_OFF,
                job_status=status,
                reason=f"continued as {request.job_type}",
                continuation_job_id=continuation,
                **base,
            )
        message = self._outcome_message(attempt, outcome)
        status = await self._report(conn, attempt, message)
        kind = message.WhichOneof("outcome")
        if status == JobStatus.CANCELLED:
            # The coordinator recorded the cancel (the attempt's own outcome stays in
            # the job's history).
            return InlineResult(
                InlineStatus.CANCELLED,
                job_status=status,
                value=attempt.running.value if kind == "completed" else None,
                error=message.failed.error if kind == "failed" else "",
                exception=attempt.running.error,
                reason="cancel requested while it ran",
                **base,
            )
        if kind == "released":
            return InlineResult(
                InlineStatus.HANDED_OFF,
                job_status=status,
                reason=message.released.reason,
                **base,
            )
        if kind == "completed":
            return InlineResult(
                InlineStatus.COMPLETED, job_status=status, value=attempt.running.value, **base
            )
        return InlineResult(
            InlineStatus.FAILED,
            job_status=status,
            error=message.failed.error,
            exception=attempt.running.error,
            **base,
        )

    async def _enqueue_continuation(
        self, conn: _Connection, ctx: InlineJobContext, request: ContinueAs
    ) -> str:
        job = ctx.job
        fields: dict[str, Any] = {
            "tenant_id": job.tenant_id,
            "workflow": job.workflow,
            "category": JobCategory.CONTINUATION,
            "priority": job.priority,
            "traceparent": job.traceparent or None,
            "tracestate": job.tracestate or None,
            "idempotency_key": f"{job.id}/continuation",
        }
        fields.update(request.options)
        spec = JobRequest(job_type=request.job_type, payload=request.payload, **fields).to_proto()
        response = await self._retrying(
            lambda: conn.scheduler.Enqueue(
                scheduler_service_pb2.EnqueueRequest(job=spec),
                timeout=self._rpc_timeout,
                metadata=self._config.metadata,
            ),
            f"enqueue the continuation of job {job.id}",
        )
        return str(response.job.id)

    async def _report(
        self, conn: _Connection, attempt: _InlineAttempt, outcome: worker_service_pb2.JobOutcome
    ) -> JobStatus:
        request = worker_service_pb2.ReportOutcomesRequest(outcomes=[outcome])
        response = await self._retrying(
            lambda: conn.worker.ReportOutcomes(
                request, timeout=self._rpc_timeout, metadata=self._config.metadata
            ),
            f"report the outcome of inline job {outcome.job_id}",
        )
        (result,) = response.results
        if result.accepted:
            return JobStatus.from_proto(result.status)
        code = getattr(grpc.StatusCode, result.error_code, grpc.StatusCode.FAILED_PRECONDITION)
        if code == grpc.StatusCode.FAILED_PRECONDITION:
            error: WorkflowJobsError = LeaseLostError(code, result.error_message)
        else:
            error = error_for_status(code, result.error_message)
        error.job_id = outcome.job_id  # type: ignore[attr-defined]
        raise error

    async def _retrying(self, call: Callable[[], Any], what: str) -> Any:
        """Retry ``call`` on transient errors for up to ``report_timeout`` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._report_timeout
        backoff = Backoff(_CALL_BACKOFF)
        while True:
            try:
                return await call()
            except grpc.aio.AioRpcError as exc:
                delay = backoff.next_delay()
                if exc.code() not in RETRYABLE_CODES or loop.time() + delay > deadline:
                    raise error_from_rpc(exc) from exc
                logger.warning(
                    "could not %s (%s: %s); retrying in %.2fs",
                    what,
                    exc.code().name,
                    exc.details(),
                    delay,
                )
                await asyncio.sleep(delay)

    # -- connections and lifecycle ------------------------------------------------------------

    def _connection(self) -> _Connection:
        if self._closed:
            raise RuntimeError("the InlineRunner is closed")
        loop = asyncio.get_running_loop()
        conn = self._connections.get(loop)
        if conn is None:
            for stale in [lp for lp in self._connections if lp.is_closed()]:
                del self._connections[stale]
            channel = self._config.aio_channel()
            conn = self._connections[loop] = _Connection(
                channel,
                scheduler_service_pb2_grpc.JobSchedulerServiceStub(channel),
                worker_service_pb2_grpc.WorkerServiceStub(channel),
            )
        return conn

    def _background(self) -> asyncio.AbstractEventLoop:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            raise RuntimeError(
                "run_sync()/wait_sync() block; from a coroutine use await run()/wait()"
            )
        with self._lock:
            if self._closed:
                raise RuntimeError("the InlineRunner is closed")
            if self._background_loop is None:
                loop = asyncio.new_event_loop()
                self._background_executor = ThreadPoolExecutor(
                    self._thread_pool_size, thread_name_prefix="wfjobs-inline"
                )
                loop.set_default_executor(self._background_executor)
                thread = threading.Thread(
                    target=loop.run_forever, name="wfjobs-inline-loop", daemon=True
                )
                thread.start()
                self._background_loop, self._background_thread = loop, thread
            return self._background_loop

    async def _close_connection(self) -> None:
        conn = self._connections.pop(asyncio.get_running_loop(), None)
        if conn is not None:
            await conn.channel.close(None)

    def close(self) -> None:
        """Stop the background loop of :meth:`run_sync` and close its channel. Idempotent.

        Async callers use :meth:`aclose` (it also closes the channel of their loop).
        """
        with self._lock:
            self._closed = True
            loop, thread = self._background_loop, self._background_thread
            executor = self._background_executor
            self._background_loop = self._background_thread = self._background_executor = None
        if loop is None or thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close_connection(), loop).result(10)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            if executor is not None:
                executor.shutdown(wait=False, cancel_futures=True)
            if not thread.is_alive():
                loop.close()

    async def aclose(self) -> None:
        """Close the channel of the running loop and the background loop. Idempotent."""
        await self._close_connection()
        if self._background_loop is not None:
            await asyncio.to_thread(self.close)
        self._closed = True

    def __enter__(self) -> InlineRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> InlineRunner:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _enqueue_error(exc: grpc.aio.AioRpcError) -> WorkflowJobsError:
    error = error_from_rpc(exc)
    if isinstance(error, FailedPreconditionError) and "paused" in error.message.lower():
        return JobPausedError(error.code, error.message)
    return error


def _not_run(response: scheduler_service_pb2.EnqueueResponse, result_type: Any) -> InlineResult:
    view = JobView.from_proto(response.job, deduplicated=response.deduplicated)
    base: dict[str, Any] = {
        "job_id": view.id,
        "job_status": view.status,
        "deduplicated": view.deduplicated,
    }
    if view.status == JobStatus.COMPLETED:
        return InlineResult(InlineStatus.COMPLETED, value=view.result_value(result_type), **base)
    if view.status == JobStatus.FAULTED:
        return InlineResult(InlineStatus.FAILED, error=view.last_error, **base)
    if view.status == JobStatus.CANCELLED:
        return InlineResult(InlineStatus.CANCELLED, error=view.last_error, **base)
    return InlineResult(InlineStatus.QUEUED, **base)
