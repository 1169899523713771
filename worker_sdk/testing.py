"""Run handlers without a coordinator, for users' unit tests.

:func:`run_handler` runs a handler through the worker's own execution path: it
encodes the payload with the payload codec, decodes it for the handler's
parameter annotation, builds a :class:`JobContext` (reachable through
:func:`current_job` too), runs a blocking handler in a thread and an async one
on an event loop (both bounded by the job's execution timeout), and can set
the cancel signal after a delay::

    from worker_sdk.testing import run_handler

    def test_resize():
        assert run_handler(resize, ResizeRequest(url="...", width=10)) == {"ok": True}
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from workflowjobs.v1 import job_pb2, worker_service_pb2

from ._codec import encode_payload
from ._context import CancelReason, ChildEnqueuer, JobContext
from ._convert import WorkflowRef, to_duration
from ._execution import Attempt, run_attempt
from ._handler import HandlerSpec

__all__ = ["arun_handler", "make_job_context", "run_handler"]


def make_job_context(
    payload: Any = None,
    *,
    job_type: str = "test",
    job_id: str | None = None,
    attempt: int = 1,
    max_attempts: int = 3,
    tenant_id: str = "default",
    workflow: WorkflowRef | None = None,
    content_type: str | None = None,
    execution_timeout: timedelta | float | None = None,
    on_heartbeat: Callable[[Any], None] | None = None,
    children: ChildEnqueuer | None = None,
    loop: asyncio.AbstractEventLoop | None = None,
) -> JobContext:
    """Build a :class:`JobContext` for a fake job.

    Args:
        payload: The job's input, encoded with the payload codec (so a handler
            sees exactly what it would see from a real coordinator).
        job_type: Job type.
        job_id: Job id; a random one when None.
        attempt: Attempt number.
        max_attempts: Attempts allowed.
        tenant_id: Tenant.
        workflow: Workflow context.
        content_type: Content type for raw ``bytes`` payloads.
        execution_timeout: Sets the context's deadline.
        on_heartbeat: Called with the details of every ``ctx.heartbeat()``.
        children: What ``ctx.enqueue_async`` enqueues child jobs with (e.g. an
            ``AsyncSchedulerClient``, or a fake recording the calls).
        loop: The event loop ``ctx.enqueue`` (the blocking form) runs
            ``children`` on.

    Returns:
        A context not bound to any worker.
    """
    job = job_pb2.Job(
        id=job_id or str(uuid.uuid4()),
        job_type=job_type,
        tenant_id=tenant_id,
        attempt=attempt,
        max_attempts=max_attempts,
        status=job_pb2.JOB_STATUS_RUNNING,
        payload=encode_payload(payload, content_type),
    )
    job.create_time.FromDatetime(datetime.now(UTC))
    if workflow is not None:
        job.workflow.CopyFrom(workflow.to_proto())
    if execution_timeout is not None:
        job.execution_timeout.CopyFrom(to_duration(execution_timeout))

    def heartbeat(_ctx: JobContext, details: Any) -> None:
        if on_heartbeat is not None:
            on_heartbeat(details)

    return JobContext(
        job=job,
        lease_token="test-lease",
        lease_expire_time=datetime.now(UTC) + timedelta(minutes=5),
        worker_id="test-worker",
        heartbeat_callback=heartbeat,
        children=children,
        loop=loop,
    )


def run_handler(
    func: Callable[..., Any],
    payload: Any = None,
    *,
    job_type: str = "test",
    attempt: int = 1,
    max_attempts: int = 3,
    tenant_id: str = "default",
    workflow: WorkflowRef | None = None,
    content_type: str | None = None,
    cancel_after: float | None = None,
    context: JobContext | None = None,
) -> Any:
    """Run a handler (async or plain) once, as the worker would, and return its result.

    Must not be called from inside a running event loop; use :func:`arun_handler` there.

    Args:
        func: The handler.
        payload: The job's input (see :func:`make_job_context`).
        job_type: Job type.
        attempt: Attempt number.
        max_attempts: Attempts allowed.
        tenant_id: Tenant.
        workflow: Workflow context.
        content_type: Content type for raw ``bytes`` payloads.
        cancel_after: Set the cancel signal (reason "cancel requested") after
            this many seconds; 0 cancels before the handler starts.
        context: Use this context (from :func:`make_job_context`) instead of
            building one, e.g. to inspect it afterwards; the payload-related
            arguments are then ignored.

    Returns:
        The handler's return value (checked to be encodable).

    Raises:
        PayloadDecodeError: The payload does not fit the handler's parameter
            (the worker fails such an attempt without retrying).
        PayloadEncodeError: The return value cannot be encoded as a result.
        TimeoutError: An async handler ran past the context's execution timeout.
        Exception: Whatever the handler raised.
    """
    spec = HandlerSpec.build(job_type, func)
    ctx = context or make_job_context(
        payload,
        job_type=job_type,
        attempt=attempt,
        max_attempts=max_attempts,
        tenant_id=tenant_id,
        workflow=workflow,
        content_type=content_type,
    )
    return asyncio.run(_run(spec, ctx, cancel_after))


async def arun_handler(
    func: Callable[..., Any],
    payload: Any = None,
    *,
    job_type: str = "test",
    attempt: int = 1,
    max_attempts: int = 3,
    tenant_id: str = "default",
    workflow: WorkflowRef | None = None,
    content_type: str | None = None,
    cancel_after: float | None = None,
    context: JobContext | None = None,
) -> Any:
    """Like :func:`run_handler`, from inside an event loop; plain handlers run in a thread."""
    spec = HandlerSpec.build(job_type, func)
    ctx = context or make_job_context(
        payload,
        job_type=job_type,
        attempt=attempt,
        max_attempts=max_attempts,
        tenant_id=tenant_id,
        workflow=workflow,
        content_type=content_type,
    )
    return await _run(spec, ctx, cancel_after)


async def _run(spec: HandlerSpec, ctx: JobContext, cancel_after: float | None) -> Any:
    attempt = Attempt(
        leased=worker_service_pb2.LeasedJob(job=ctx.job, lease_token=ctx.lease_token),
        ctx=ctx,
        handler=spec,
        lease_duration=None,
    )
    if cancel_after is not None and cancel_after <= 0:
        ctx._cancel(CancelReason.CANCEL_REQUESTED)
    elif cancel_after is not None:
        loop = asyncio.get_running_loop()
        attempt.timers.append(
            loop.call_later(cancel_after, ctx._cancel, CancelReason.CANCEL_REQUESTED)
        )
    await run_attempt(attempt, executor=None, worker_id=ctx.worker_id)
    if attempt.error is not None:
        raise attempt.error
    return attempt.value
