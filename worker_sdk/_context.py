"""The context a handler runs in: job identity, workflow refs, lease and cancellation.

Handler code reaches it either by declaring a parameter annotated
:class:`JobContext` or by calling :func:`current_job` anywhere below the handler
(the worker copies the context variable into the thread pool for blocking
handlers).

A handler enqueues follow-up work with ``ctx.enqueue(...)`` (blocking handlers)
or ``await ctx.enqueue_async(...)`` (async handlers): a *child job* that
records this job as its parent, inherits its tenant and workflow refs unless
given others, and is deduplicated per parent (see :meth:`JobContext.enqueue_async`).

Cancellation is a one-way signal with a reason: the coordinator asked to cancel
the job, the lease was lost, the execution deadline passed, or the worker is
shutting down. Setting it happens on the worker's event loop; reading and
waiting work from the loop (``await ctx.cancelled.wait()``) and from a thread
(``ctx.cancelled.wait_blocking(timeout)``).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from workflowjobs.v1 import job_pb2

from ._convert import WorkflowRef, from_duration, from_timestamp
from ._errors import bounded_push_back

if TYPE_CHECKING:
    from ._convert import JobView

__all__ = ["CancelReason", "CancelSignal", "ChildEnqueuer", "JobContext", "current_job"]

_current_job: contextvars.ContextVar[JobContext] = contextvars.ContextVar("worker_sdk_current_job")
_JOB_LOGGER = logging.getLogger("worker_sdk.job")


class CancelReason:
    """Why a job's cancel signal was set."""

    CANCEL_REQUESTED = "cancel requested"
    LEASE_LOST = "lease lost"
    DEADLINE_EXCEEDED = "execution deadline exceeded"
    WORKER_SHUTDOWN = "worker shutting down"
    BUDGET_EXHAUSTED = "inline time budget exhausted"


class CancelSignal:
    """A one-shot, thread-safe cancellation flag with an asyncio face.

    Usable like an ``asyncio.Event`` from async handlers (``is_set()``,
    ``await wait()``) and from blocking handlers (``wait_blocking()``).
    The events behind the waits are made on first use: most jobs never wait,
    and one signal is built per job.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._set = False
        self._thread_event: threading.Event | None = None
        self._async_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.reason: str | None = None

    def is_set(self) -> bool:
        """True once the job should stop."""
        return self._set

    async def wait(self) -> bool:
        """Wait until the signal is set (from a coroutine). Returns True."""
        with self._lock:
            if self._set:
                return True
            if self._async_event is None:
                self._async_event = asyncio.Event()
                self._loop = asyncio.get_running_loop()
            event = self._async_event
        await event.wait()
        return True

    def wait_blocking(self, timeout: float | None = None) -> bool:
        """Block the calling thread until the signal is set or ``timeout`` passes.

        Args:
            timeout: Seconds to wait; None waits forever.

        Returns:
            True when the signal is set.
        """
        with self._lock:
            if self._set:
                return True
            if self._thread_event is None:
                self._thread_event = threading.Event()
            event = self._thread_event
        return event.wait(timeout)

    def set(self, reason: str) -> None:
        """Set the signal. Thread-safe; the first reason wins.

        Args:
            reason: One of the :class:`CancelReason` values, or free text.
        """
        with self._lock:
            if self._set:
                return
            self.reason = reason
            self._set = True
            thread_event, async_event, loop = self._thread_event, self._async_event, self._loop
        if thread_event is not None:
            thread_event.set()
        if async_event is None or loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            async_event.set()
        else:
            loop.call_soon_threadsafe(async_event.set)


class _JobLoggerAdapter(logging.LoggerAdapter):  # type: ignore[type-arg]
    """Adds the job's identity to every record, keeping extras given per call."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        kwargs["extra"] = {**(self.extra or {}), **kwargs.get("extra", {})}
        return msg, kwargs


class _NoCheckpoint:
    def __repr__(self) -> str:
        return "<no checkpoint>"


NO_CHECKPOINT: Any = _NoCheckpoint()
"""Marks "no checkpoint recorded" (``None`` is a valid checkpoint)."""

HeartbeatCallback = Callable[["JobContext", Any], None]


class ChildEnqueuer(Protocol):
    """What a context enqueues child jobs with: an ``AsyncSchedulerClient``
    (``enqueue(job_type, payload, **options)`` answering a ``JobView``)."""

    @property
    def enqueue(self) -> Callable[..., Awaitable[JobView]]:
        """The enqueue coroutine function."""
        ...


# Prefix of the idempotency key of a child job: "child:<parent id>:<key>".
CHILD_KEY_PREFIX = "child"


class JobContext:
    """What a handler knows about the job it is running.

    Built by the worker (or :func:`worker_sdk.testing.run_handler`); handlers
    never construct it.
    """

    def __init__(
        self,
        *,
        job: job_pb2.Job,
        lease_token: str = "",
        lease_expire_time: datetime | None = None,
        worker_id: str = "",
        heartbeat_callback: HeartbeatCallback | None = None,
        logger: logging.Logger | None = None,
        start_time: datetime | None = None,
        children: ChildEnqueuer | None = None,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._job = job
        self._children = children
        self._loop = loop
        self._child_lock = threading.Lock()
        self._child_ordinal = 0
        self._lease_token = lease_token
        self._worker_id = worker_id
        self._heartbeat_callback = heartbeat_callback
        self._cancelled = CancelSignal()
        self._stopping = CancelSignal()
        self.lease_expire_time: datetime | None = lease_expire_time
        """When the current lease expires; refreshed by every heartbeat."""
        self.start_time: datetime = start_time or datetime.now(UTC)
        """When this attempt started on this worker."""
        self.heartbeat_details: Any = None
        """The details passed to the latest :meth:`heartbeat` call."""
        self.checkpoint_value: Any = NO_CHECKPOINT
        """The value passed to the latest :meth:`checkpoint` call."""
        self.push_back: timedelta | None = None
        """The push-back reported by :meth:`throttle` (its longest ``retry_after``;
        zero when none was given); None when none was reported."""
        timeout = from_duration(job.execution_timeout)
        self.deadline: datetime | None = self.start_time + timeout if timeout else None
        """When this attempt must be done (from the job's execution timeout), or None."""
        self._workflow: WorkflowRef | None = None
        self._base_logger = logger
        self._logger: logging.LoggerAdapter | None = None  # type: ignore[type-arg]

    @property
    def workflow(self) -> WorkflowRef:
        """The workflow context of the job."""
        if self._workflow is None:
            self._workflow = WorkflowRef.from_proto(self._job.workflow)
        return self._workflow

    @property
    def logger(self) -> logging.LoggerAdapter:  # type: ignore[type-arg]
        """A logger adapter whose records carry job_id, job_type, tenant_id and attempt."""
        if self._logger is None:
            job = self._job
            self._logger = _JobLoggerAdapter(
                self._base_logger or _JOB_LOGGER,
                {
                    "job_id": job.id,
                    "job_type": job.job_type,
                    "tenant_id": job.tenant_id,
                    "attempt": job.attempt,
                },
            )
        return self._logger

    @logger.setter
    def logger(self, value: logging.LoggerAdapter) -> None:  # type: ignore[type-arg]
        self._logger = value

    def _logs(self, level: int) -> bool:
        """True when :attr:`logger` would emit at ``level`` (without building it)."""
        if self._logger is not None:
            return self._logger.isEnabledFor(level)
        return (self._base_logger or _JOB_LOGGER).isEnabledFor(level)

    @property
    def job(self) -> job_pb2.Job:
        """The raw ``workflowjobs.v1.Job`` message as leased."""
        return self._job

    @property
    def job_id(self) -> str:
        """The job's id."""
        return self._job.id

    @property
    def job_type(self) -> str:
        """The job's type."""
        return self._job.job_type

    @property
    def attempt(self) -> int:
        """This attempt's number (1-based)."""
        return self._job.attempt

    @property
    def max_attempts(self) -> int:
        """Attempts allowed before the job is faulted."""
        return self._job.max_attempts

    @property
    def is_last_attempt(self) -> bool:
        """True when a failure of this attempt faults the job."""
        return 0 < self._job.max_attempts <= self._job.attempt

    @property
    def tenant_id(self) -> str:
        """The owning tenant."""
        return self._job.tenant_id

    @property
    def definition_id(self) -> str:
        """Workflow definition id."""
        return self._job.workflow.definition_id

    @property
    def definition_version(self) -> int:
        """Workflow definition version."""
        return self._job.workflow.definition_version

    @property
    def instance_id(self) -> str:
        """Workflow instance id."""
        return self._job.workflow.instance_id

    @property
    def activity_id(self) -> str:
        """Activity id."""
        return self._job.workflow.activity_id

    @property
    def activity_node_id(self) -> str:
        """Activity node id."""
        return self._job.workflow.activity_node_id

    @property
    def bookmark_id(self) -> str:
        """Bookmark id."""
        return self._job.workflow.bookmark_id

    @property
    def correlation_id(self) -> str:
        """Correlation id."""
        return self._job.workflow.correlation_id

    @property
    def payload(self) -> bytes:
        """The raw payload bytes."""
        return self._job.payload.data

    @property
    def content_type(self) -> str:
        """The payload's content type."""
        return self._job.payload.content_type

    @property
    def traceparent(self) -> str:
        """W3C traceparent of the enqueuer (may be empty)."""
        return self._job.traceparent

    @property
    def lease_token(self) -> str:
        """The lease token of this attempt."""
        return self._lease_token

    @property
    def worker_id(self) -> str:
        """Id of the worker running this attempt."""
        return self._worker_id

    @property
    def created_at(self) -> datetime | None:
        """When the job was enqueued."""
        return from_timestamp(self._job.create_time)

    @property
    def cancelled(self) -> CancelSignal:
        """The cancel signal: ``is_set()``, ``await wait()``, ``wait_blocking()``."""
        return self._cancelled

    @property
    def cancel_reason(self) -> str | None:
        """Why the job was cancelled (a :class:`CancelReason` value), or None."""
        return self._cancelled.reason

    @property
    def lease_lost(self) -> bool:
        """True when the coordinator reported this attempt's lease as lost."""
        return self._cancelled.reason == CancelReason.LEASE_LOST

    def is_cancelled(self) -> bool:
        """True when the handler should stop: cancel requested, lease lost,
        deadline passed or worker shutting down."""
        return self._cancelled.is_set()

    @property
    def stopping(self) -> CancelSignal:
        """Set when the worker starts shutting down: ``is_set()``, ``await wait()``,
        ``wait_blocking()``; its ``reason`` is ``CancelReason.WORKER_SHUTDOWN``."""
        return self._stopping

    def is_stopping(self) -> bool:
        """True once the worker is shutting down (SIGTERM, ``shutdown()``).

        Not a cancel: the handler may still finish within the worker's
        ``shutdown_grace``, and its outcome is reported as usual. A handler that
        cannot finish in time can save a checkpoint or stop early; when the
        grace runs out its cancel signal is set (reason ``worker shutting
        down``), it is cancelled and the job is handed back unfinished.
        """
        return self._stopping.is_set()

    def heartbeat(self, details: Any = None) -> None:
        """Ask for an early heartbeat of this job's lease.

        Leases are heartbeated automatically; call this to renew sooner, e.g.
        after a long blocking step. Safe from coroutines and threads; it never
        blocks.

        Args:
            details: Progress information kept on the context as
                :attr:`heartbeat_details` (not sent to the coordinator).
        """
        self.heartbeat_details = details
        if self._heartbeat_callback is not None:
            self._heartbeat_callback(self, details)

    def throttle(self, retry_after: timedelta | float | None = None) -> None:
        """Report that the downstream this handler calls pushed back (e.g. HTTP 429).

        The report travels with this attempt's outcome, whatever it is: the
        handler goes on (raise :class:`worker_sdk.Throttled` instead to fail
        the attempt too). Every rate limit covering the job then admits no
        start before ``retry_after`` from the report (None: one start interval
        at the slowed rate) and halves its rate, down to 1/16, recovering one
        step every 10 periods without push-back. Jobs without a rate limit are
        not affected. Calling it again keeps the longest ``retry_after``.

        Args:
            retry_after: How long the downstream asked to wait (seconds or a
                ``timedelta``); None when it said nothing. Longer than 366 days
                (what the coordinator holds a limit for): 366 days are
                reported, with a warning in the job's log (an infinite number of
                seconds too).

        Raises:
            ValueError: ``retry_after`` is negative or NaN.
        """
        hold = bounded_push_back(retry_after, self.logger) or timedelta(0)
        if self.push_back is None or hold > self.push_back:
            self.push_back = hold

    # -- child jobs --------------------------------------------------------------------------

    def child_key(self, key: str | None = None) -> str:
        """The idempotency key of this job's next child (``key``: the caller's own).

        ``child:<this job's id>:<key>``, or ``child:<id>:#<n>`` for the n-th
        (from 0) child enqueued without a key in this attempt. It does not depend
        on the attempt: a retried handler that enqueues the same children in the
        same order gets the jobs its earlier attempts stored, not new ones.
        """
        if key is None:
            with self._child_lock:
                n = self._child_ordinal
                self._child_ordinal += 1
            key = f"#{n}"
        elif not key:
            raise ValueError("a child key must not be empty (pass None for the call's ordinal)")
        return f"{CHILD_KEY_PREFIX}:{self.job_id}:{key}"

    async def enqueue_async(
        self,
        job_type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        tenant_id: str | None = None,
        workflow: WorkflowRef | job_pb2.WorkflowRef | None = None,
        **options: Any,
    ) -> JobView:
        """Enqueue a child job of this one (from an async handler).

        The child records this job as its ``parent_job_id`` (GetJob shows it,
        ListJobs filters by it) and its trace context is this attempt's span,
        so its trace hangs under the parent's. It belongs to this job's tenant
        and carries this job's workflow refs unless ``tenant_id`` or
        ``workflow`` say otherwise.

        Children are deduplicated per parent: the idempotency key is
        :meth:`child_key` (``key``, or the ordinal of the call among this
        attempt's keyless calls), so a retried parent that enqueues again gets
        the same child jobs back (``deduplicated`` is then True). Give a
        ``key`` when the children a handler enqueues vary between attempts.

        Uses the worker's own channel and credential (an inline attempt's:
        the ``InlineRunner``'s); it needs the ``scheduler`` role when the
        coordinator checks roles.

        Args:
            job_type: The child's job type.
            payload: The child's payload (as for ``SchedulerClient.enqueue``).
            key: Dedupe key of this child within the parent.
            tenant_id: The child's tenant (default: this job's).
            workflow: The child's workflow refs (default: this job's).
            **options: Any other ``SchedulerClient.enqueue`` option (``delay``,
                ``priority``, ``category``, ``retry_policy``, ...), except
                ``idempotency_key`` and ``parent_job_id``, which are set here.

        Raises:
            RuntimeError: The context has no scheduler (a context built by
                ``worker_sdk.testing.run_handler`` without one).
            TypeError: ``idempotency_key`` or ``parent_job_id`` was given.
        """
        for reserved in ("idempotency_key", "parent_job_id"):
            if reserved in options:
                raise TypeError(
                    f"{reserved} is set by ctx.enqueue; name the child with key=... instead"
                )
        if self._children is None:
            raise RuntimeError(
                f"job {self.job_id}: this context cannot enqueue child jobs (no scheduler); "
                "handlers run by a Worker or an InlineRunner can"
            )
        return await self._children.enqueue(
            job_type,
            payload,
            tenant_id=tenant_id or self.tenant_id,
            workflow=workflow if workflow is not None else self.workflow,
            idempotency_key=self.child_key(key),
            parent_job_id=self.job_id,
            **options,
        )

    def enqueue(
        self,
        job_type: str,
        payload: Any = None,
        *,
        key: str | None = None,
        tenant_id: str | None = None,
        workflow: WorkflowRef | job_pb2.WorkflowRef | None = None,
        **options: Any,
    ) -> JobView:
        """Enqueue a child job of this one and wait for the answer (blocking handlers).

        The same as :meth:`enqueue_async` (arguments, inheritance, dedupe),
        from a handler running in the worker's thread pool. From a coroutine on
        the worker's event loop it would block the loop: use ``await
        ctx.enqueue_async(...)`` there.

        Raises:
            RuntimeError: Called on the worker's event loop, or without a scheduler.
        """
        loop = self._loop
        if self._children is None or loop is None:
            raise RuntimeError(
                f"job {self.job_id}: this context cannot enqueue child jobs (no scheduler); "
                "handlers run by a Worker or an InlineRunner can"
            )
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            raise RuntimeError(
                "ctx.enqueue() blocks and would stall the worker's event loop; "
                "in an async handler use: await ctx.enqueue_async(...)"
            )
        coro = self.enqueue_async(
            job_type, payload, key=key, tenant_id=tenant_id, workflow=workflow, **options
        )
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    # -- execution modes: implemented by worker_sdk._inline.InlineJobContext ----------------

    @property
    def is_inline(self) -> bool:
        """True when the enqueuer runs this attempt in its own process (inline
        execution); only then can the handler :meth:`hand_off` or :meth:`continue_as`."""
        return False

    def checkpoint(self, value: Any) -> None:
        """Record progress: the payload to resume from if this attempt is handed off.

        An inline attempt that is handed off (by :meth:`hand_off` without a
        checkpoint, or when its time budget runs out) is released with the
        latest checkpoint as its new payload. Elsewhere it is only kept on the
        context as :attr:`checkpoint_value`.

        Args:
            value: A value of the handler's payload type.
        """
        self.checkpoint_value = value

    def hand_off(self, checkpoint: Any = NO_CHECKPOINT, *, reason: str = "") -> NoReturn:
        """End the inline part and release the job to distributed workers.

        Only inline attempts can hand off (see :attr:`is_inline`).

        Raises:
            RuntimeError: Always, outside inline execution.
        """
        raise RuntimeError(
            f"job {self.job_id}: hand_off() needs an inline execution (InlineRunner); "
            "this attempt runs on a worker (check ctx.is_inline)"
        )

    def continue_as(self, job_type: str, payload: Any = None, **options: Any) -> NoReturn:
        """Enqueue a continuation job and complete this one.

        Only inline attempts can continue as another job (see :attr:`is_inline`).

        Raises:
            RuntimeError: Always, outside inline execution.
        """
        raise RuntimeError(
            f"job {self.job_id}: continue_as() needs an inline execution (InlineRunner); "
            "this attempt runs on a worker (check ctx.is_inline)"
        )

    def _cancel(self, reason: str) -> None:
        if reason == CancelReason.WORKER_SHUTDOWN:
            self._stopping.set(reason)
        self._cancelled.set(reason)

    def _stop(self) -> None:
        self._stopping.set(CancelReason.WORKER_SHUTDOWN)

    def __repr__(self) -> str:
        return (
            f"JobContext(job_id={self.job_id!r}, job_type={self.job_type!r}, "
            f"attempt={self.attempt}, tenant_id={self.tenant_id!r})"
        )


def current_job() -> JobContext:
    """The :class:`JobContext` of the handler running in the current context.

    Works in async handlers, in blocking handlers run in the thread pool, and
    in code they call.

    Raises:
        RuntimeError: Called outside a job handler.
    """
    try:
        return _current_job.get()
    except LookupError:
        raise RuntimeError("current_job() called outside a job handler") from None


def set_current_job(ctx: JobContext) -> contextvars.Token[JobContext]:
    """Bind ``ctx`` as the current job in this context (worker internals)."""
    return _current_job.set(ctx)


def reset_current_job(token: contextvars.Token[JobContext]) -> None:
    """Undo :func:`set_current_job`."""
    _current_job.reset(token)
