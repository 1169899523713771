"""Enqueue jobs and read them back: ``JobSchedulerService`` for Python callers.

:class:`SchedulerClient` blocks; :class:`AsyncSchedulerClient` is the asyncio
twin with the same methods. Both return :class:`JobView` snapshots (the raw
``workflowjobs.v1.Job`` is on ``JobView.raw``) and raise typed
:class:`WorkflowJobsError` subclasses.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, Unpack

import grpc

from workflowjobs.v1 import job_pb2, scheduler_service_pb2, scheduler_service_pb2_grpc

from . import _tracing
from ._backoff import Backoff, BackoffConfig
from ._convert import (
    GroupView,
    JobCategory,
    JobRequest,
    JobStatus,
    JobView,
    RetryPolicy,
    Uniqueness,
    WorkflowRef,
    job_specs,
    to_duration,
    to_timestamp,
)
from ._errors import DeadlineExceededError, WorkflowJobsError, error_from_rpc
from ._events import AsyncEventWatch, EventWatch, JobEvent, JobEventFilter, watch_request
from ._transport import BlockingClient, ChannelConfig, ClientOptions

__all__ = ["AsyncSchedulerClient", "EnqueueResult", "SchedulerClient"]

# Delays between reconnections of an event watch while the coordinator is unavailable.
WATCH_RECONNECT = BackoffConfig(initial=0.1, maximum=5.0)


def _wait_error(exc: grpc.RpcError, job_id: str, timeout: float | None) -> WorkflowJobsError:
    """The error of a failed WaitForJob call; its deadline is the caller's ``timeout``."""
    if timeout is not None and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
        return DeadlineExceededError(
            grpc.StatusCode.DEADLINE_EXCEEDED, f"job {job_id} did not finish within {timeout:g}s"
        )
    return error_from_rpc(exc)


@dataclasses.dataclass(frozen=True, slots=True)
class EnqueueResult:
    """One job of an ``enqueue_batch`` call.

    Attributes:
        job_id: Id of the job (the existing one when deduplicated).
        deduplicated: True when an existing job with the same idempotency key was returned.
        status: The job's status.
        debounced: True when the job's uniqueness key debounced this one (the
            key's pending job took its payload and a later due time).
    """

    job_id: str
    deduplicated: bool
    status: JobStatus
    debounced: bool = False


def _enqueue_request(
    job_type: str,
    payload: Any,
    **options: Any,
) -> scheduler_service_pb2.EnqueueRequest:
    return scheduler_service_pb2.EnqueueRequest(
        job=JobRequest(job_type=job_type, payload=payload, **options).to_proto()
    )


def _batch_results(response: scheduler_service_pb2.EnqueueBatchResponse) -> list[EnqueueResult]:
    return _results(response.results)


def _results(results: Sequence[scheduler_service_pb2.EnqueueResult]) -> list[EnqueueResult]:
    return [
        EnqueueResult(
            job_id=r.job_id,
            deduplicated=r.deduplicated,
            status=JobStatus.from_proto(r.status),
            debounced=r.debounced,
        )
        for r in results
    ]


# Misfire policies of ``enqueue_tick`` by their SDK names.
MISFIRE_POLICIES = {
    "fire_once_late": job_pb2.MISFIRE_POLICY_FIRE_ONCE_LATE,
    "skip": job_pb2.MISFIRE_POLICY_SKIP,
}


def _tick_request(
    schedule_id: str,
    nominal_time: datetime,
    job_type: str,
    payload: Any,
    misfire: str,
    misfire_grace: timedelta | float | None,
    options: dict[str, Any],
) -> scheduler_service_pb2.EnqueueRequest:
    if misfire not in MISFIRE_POLICIES:
        raise ValueError(f"misfire must be one of {', '.join(MISFIRE_POLICIES)}, got {misfire!r}")
    request = _enqueue_request(job_type, payload, **options)
    tick = request.job.schedule_tick
    tick.schedule_id = schedule_id
    tick.nominal_time.CopyFrom(to_timestamp(nominal_time))
    tick.misfire_policy = MISFIRE_POLICIES[misfire]
    if misfire_grace is not None:
        tick.misfire_grace.CopyFrom(to_duration(misfire_grace))
    return request


def _tick_answer(response: scheduler_service_pb2.EnqueueResponse) -> JobView | None:
    if response.skipped:
        return None
    return JobView.from_proto(response.job, deduplicated=response.deduplicated)


def _group_request(
    completion: JobRequest | job_pb2.JobSpec,
    members: Sequence[JobRequest | job_pb2.JobSpec],
    tenant_id: str,
    close: bool,
    idempotency_key: str,
) -> scheduler_service_pb2.CreateGroupRequest:
    [completion_spec] = job_specs([completion])
    return scheduler_service_pb2.CreateGroupRequest(
        tenant_id=tenant_id,
        completion=completion_spec,
        members=job_specs(members),
        close=close,
        idempotency_key=idempotency_key,
    )


class SchedulerClient(BlockingClient):
    """Blocking client of ``JobSchedulerService``. Use as a context manager or call :meth:`close`.

    Args:
        target: The coordinator's address (None: ``WFJOBS_TARGET``, the
            profile, else 127.0.0.1:50051).
        credentials: TLS/mTLS channel credentials (None: ``WFJOBS_CA`` …, the
            profile, else plaintext).
        token: Bearer token (None: ``WFJOBS_TOKEN``, ``WFJOBS_TOKEN_FILE``, the profile).
        metadata: Extra metadata sent with every call.
        timeout: Default deadline of each call, in seconds (None: no deadline).
        channel_options: Extra gRPC channel options.
        channel: Use this channel instead of opening one (it is not closed by :meth:`close`).
        load_balancing: gRPC load-balancing policy (``round_robin``; None:
            ``WFJOBS_LOAD_BALANCING``, the profile, else gRPC's pick_first).
    """

    def __init__(self, target: str | None = None, **options: Unpack[ClientOptions]) -> None:
        super().__init__(target, **options)
        self._stub = scheduler_service_pb2_grpc.JobSchedulerServiceStub(self._channel)

    def enqueue(
        self,
        job_type: str,
        payload: Any = None,
        *,
        tenant_id: str = "default",
        workflow: WorkflowRef | job_pb2.WorkflowRef | None = None,
        category: JobCategory | str | int | None = None,
        priority: int = 0,
        due: datetime | None = None,
        delay: timedelta | float | None = None,
        max_attempts: int | None = None,
        retry_policy: RetryPolicy | job_pb2.RetryPolicy | None = None,
        execution_timeout: timedelta | float | None = None,
        heartbeat_timeout: timedelta | float | None = None,
        idempotency_key: str | None = None,
        concurrency_key: str | None = None,
        content_type: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
        parent_job_id: str | None = None,
        ordering_key: str | None = None,
        uniqueness: Uniqueness | None = None,
        group_id: str | None = None,
    ) -> JobView:
        """Enqueue one job.

        Args:
            job_type: Job type; a worker with a handler for it runs the job.
            payload: ``bytes``, a protobuf message, a dataclass, a pydantic
                model or a JSON-compatible value.
            tenant_id: Owning tenant.
            workflow: Workflow context of the job.
            category: Job category.
            priority: Higher runs first within the tenant's share.
            due: When the job becomes eligible (naive means UTC).
            delay: Alternative to ``due``: eligible after this long (seconds or timedelta).
            max_attempts: Attempts before the job is faulted.
            retry_policy: Per-job retry policy.
            execution_timeout: Longest one attempt may run.
            heartbeat_timeout: Longest a lease may go without a heartbeat.
            idempotency_key: The same key within the tenant returns the same job.
            concurrency_key: Key limiting concurrency across jobs sharing it.
            content_type: Content type for raw ``bytes`` payloads.
            traceparent: W3C traceparent to link the job's traces to.
            tracestate: W3C tracestate.
            parent_job_id: The job whose handler enqueues this one (inside a
                handler use ``ctx.enqueue``, which sets it and deduplicates).
            ordering_key: Jobs of the same tenant and ordering key run one at a
                time, in enqueue order (e.g. a workflow instance id).
            uniqueness: At most one job per tenant and uniqueness key
                (:class:`Uniqueness`: unique while, for a period, or debounce).
            group_id: Join this open job group as a member (:meth:`create_group`).

        Returns:
            The job; ``deduplicated`` tells whether it already existed, and
            ``debounced`` whether it took this call's payload and a later due time.

        Raises:
            InvalidArgumentError: The coordinator rejected the job.
            WorkflowJobsError: Any other RPC failure.
        """
        with _tracing.enqueue_span(job_type, tenant_id) as context:
            if context is not None and traceparent is None:
                traceparent, tracestate = context
            request = _enqueue_request(
                job_type,
                payload,
                tenant_id=tenant_id,
                workflow=workflow,
                category=category,
                priority=priority,
                due=due,
                delay=delay,
                max_attempts=max_attempts,
                retry_policy=retry_policy,
                execution_timeout=execution_timeout,
                heartbeat_timeout=heartbeat_timeout,
                idempotency_key=idempotency_key,
                concurrency_key=concurrency_key,
                content_type=content_type,
                traceparent=traceparent,
                tracestate=tracestate,
                parent_job_id=parent_job_id,
                ordering_key=ordering_key,
                uniqueness=uniqueness,
                group_id=group_id,
            )
            response = self._call(self._stub.Enqueue, request)
        return JobView.from_proto(
            response.job, deduplicated=response.deduplicated, debounced=response.debounced
        )

    def enqueue_tick(
        self,
        schedule_id: str,
        nominal_time: datetime,
        job_type: str,
        payload: Any = None,
        *,
        misfire: str = "fire_once_late",
        misfire_grace: timedelta | float | None = None,
        **options: Any,
    ) -> JobView | None:
        """Turn one tick of a scheduler into exactly one job (docs/scheduler-ticks.md).

        Every node running the schedule may call this for the same tick: the
        schedule id and the tick's nominal time are the job's key, so all of
        them get the one job, on any coordinator replica.

        Args:
            schedule_id: The schedule (e.g. the cron job's name), per tenant.
            nominal_time: When the tick was due, as the schedule computes it
                (not when this node fired); naive means UTC.
            job_type: The job type of the tick's job.
            payload: The job's input.
            misfire: What a tick later than ``misfire_grace`` does:
                ``"fire_once_late"`` (one job now; a backlog of late ticks is
                one job) or ``"skip"`` (no job).
            misfire_grace: How late a tick may be before it misfires (seconds
                or timedelta; None: the coordinator's 60 s).
            **options: Any other :meth:`enqueue` option except
                ``idempotency_key``, ``due`` and ``delay`` (``tenant_id``,
                ``workflow``, ``category``, ...).

        Returns:
            The tick's job (``deduplicated`` when another node made it), or
            None when the tick misfired, its policy skips it and it had no job.
        """
        request = _tick_request(
            schedule_id, nominal_time, job_type, payload, misfire, misfire_grace, options
        )
        with _tracing.enqueue_span(job_type, request.job.tenant_id) as context:
            if context is not None and not request.job.traceparent:
                request.job.traceparent, request.job.tracestate = context
            return _tick_answer(self._call(self._stub.Enqueue, request))

    def create_group(
        self,
        completion: JobRequest | job_pb2.JobSpec,
        members: Sequence[JobRequest | job_pb2.JobSpec] = (),
        *,
        tenant_id: str = "default",
        close: bool = False,
        idempotency_key: str = "",
    ) -> tuple[GroupView, list[EnqueueResult]]:
        """Create a job group with its completion job and first members (docs/groups.md).

        More members join while the group is open (``enqueue(...,
        group_id=group.id)`` or :class:`JobRequest` ``group_id``). Once it is
        closed (``close=True`` here, or :meth:`close_group`) and every member
        has ended, the coordinator enqueues ``completion`` exactly once; left
        without a payload, its payload is the group's summary as JSON.

        With ``idempotency_key`` a retry is safe: a call whose key (per
        tenant) names a group already stored answers that group and the
        members it was created with (each ``deduplicated``) and stores nothing.
        A member whose own idempotency key names a job outside the group is
        refused (:class:`FailedPreconditionError`; nothing is stored).

        Returns:
            The group and its first members' results, in order.
        """
        request = _group_request(completion, members, tenant_id, close, idempotency_key)
        # The first members are enqueued in the caller's trace, as by enqueue_batch.
        with _tracing.enqueue_batch_span(request.members):
            response = self._call(self._stub.CreateGroup, request)
        return GroupView.from_proto(response.group), _results(response.members)

    def close_group(self, group_id: str) -> GroupView:
        """No more members: the group completes once every member has ended."""
        request = scheduler_service_pb2.CloseGroupRequest(group_id=group_id)
        return GroupView.from_proto(self._call(self._stub.CloseGroup, request).group)

    def get_group(self, group_id: str) -> GroupView:
        """A group's state and its members counted by status."""
        request = scheduler_service_pb2.GetGroupRequest(group_id=group_id)
        return GroupView.from_proto(self._call(self._stub.GetGroup, request).group)

    def enqueue_batch(self, jobs: Sequence[JobRequest | job_pb2.JobSpec]) -> list[EnqueueResult]:
        """Enqueue several jobs atomically: all or none.

        Args:
            jobs: :class:`JobRequest` values (or ready ``JobSpec`` messages).

        Returns:
            One result per job, in order.
        """
        specs = job_specs(jobs)
        with _tracing.enqueue_batch_span(specs):
            request = scheduler_service_pb2.EnqueueBatchRequest(jobs=specs)
            return _batch_results(self._call(self._stub.EnqueueBatch, request))

    def get_job(self, job_id: str, *, include_attempts: bool = False) -> JobView:
        """Read one job.

        Args:
            job_id: The job's id.
            include_attempts: Also return the attempt history.

        Raises:
            JobNotFoundError: No such job.
        """
        request = scheduler_service_pb2.GetJobRequest(
            job_id=job_id, include_attempts=include_attempts
        )
        return JobView.from_proto(self._call(self._stub.GetJob, request).job)

    def wait_for_job(self, job_id: str, timeout: float | None = None) -> JobView:
        """Wait until the job is ``COMPLETED``, ``FAULTED`` or ``CANCELLED``.

        Args:
            job_id: The job's id.
            timeout: Seconds to wait; None waits as long as it takes.

        Returns:
            The job in its terminal status; decode the result with
            :meth:`JobView.result_value`.

        Raises:
            DeadlineExceededError: The timeout passed first (also a ``TimeoutError``).
            JobNotFoundError: No such job.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        request = scheduler_service_pb2.WaitForJobRequest(job_id=job_id)
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise DeadlineExceededError(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"job {job_id} did not finish within {timeout:g}s",
                )
            try:
                response = self._stub.WaitForJob(
                    request, timeout=remaining, metadata=self._metadata
                )
            except grpc.RpcError as exc:
                raise _wait_error(exc, job_id, timeout) from exc
            view = JobView.from_proto(response.job)
            if view.is_terminal:
                return view

    def watch_events(
        self,
        filter: JobEventFilter | None = None,  # noqa: A002 - the RPC's own word
        *,
        after: str | None = None,
        from_oldest: bool = False,
        reconnect: bool = True,
    ) -> EventWatch:
        """Iterate over job events, then the live tail, until you stop iterating.

        The stream opens when iteration (or :meth:`EventWatch.start`) begins.
        To wait for the events of jobs you are about to enqueue, start the
        watch first: ``start()`` returns once the coordinator has placed it,
        and every event committed after that is delivered::

            with client.watch_events(JobEventFilter(correlation_id="batch-7")) as events:
                events.start()
                ids = {r.job_id for r in client.enqueue_batch(requests)}
                for event in events:
                    ...

        Args:
            filter: Which events (default: every event the token may see).
            after: Continue after this cursor (a ``JobEvent.cursor`` you processed).
            from_oldest: With no ``after``: start at the oldest event kept
                (default: only events from now on).
            reconnect: Reconnect after the last cursor seen when the
                coordinator is unavailable (restarts, failover), with backoff.

        Raises:
            OutOfRangeError: ``after`` is older than the coordinator's event retention
                (the message names the oldest cursor still accepted).
            InvalidArgumentError: ``after`` is not a cursor.
        """
        return EventWatch(self._watch_pages(filter, after, from_oldest, reconnect), after)

    def _watch_pages(
        self, flt: JobEventFilter | None, after: str | None, from_oldest: bool, reconnect: bool
    ) -> Iterator[tuple[list[JobEvent], str]]:
        """``(events, cursor)`` per response, reconnecting after the last cursor seen."""
        cursor = after
        backoff = Backoff(WATCH_RECONNECT)
        while True:
            call = self._stub.WatchJobEvents(
                watch_request(flt, cursor, from_oldest), metadata=self._metadata
            )
            try:
                for response in call:
                    backoff.reset()
                    cursor = response.cursor or cursor
                    yield [JobEvent.from_proto(e) for e in response.events], cursor or ""
            except grpc.RpcError as exc:
                if not reconnect or exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise error_from_rpc(exc) from exc
            finally:
                call.cancel()
            time.sleep(backoff.next_delay())


class AsyncSchedulerClient:
    """asyncio client of ``JobSchedulerService``; the same methods as :class:`SchedulerClient`.

    Create it inside the event loop; use ``async with`` or await :meth:`close`.

    Args:
        target: ``host:port`` of the coordinator.
        credentials: TLS/mTLS channel credentials; None for plaintext.
        token: Bearer token.
        metadata: Extra metadata sent with every call.
        timeout: Default deadline of each call, in seconds (None: no deadline).
        channel_options: Extra gRPC channel options.
        channel: Use this channel instead of opening one (it is not closed by :meth:`close`).
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        credentials: grpc.ChannelCredentials | None = None,
        token: str | None = None,
        metadata: Sequence[tuple[str, str]] = (),
        timeout: float | None = 30.0,
        channel_options: Sequence[tuple[str, Any]] = (),
        channel: grpc.aio.Channel | None = None,
        load_balancing: str | None = None,
    ) -> None:
        config = ChannelConfig(
            target,
            credentials=credentials,
            token=token,
            metadata=metadata,
            options=channel_options,
            load_balancing=load_balancing,
        )
        self._metadata = config.metadata
        self._owns_channel = channel is None
        self._channel = channel if channel is not None else config.aio_channel()
        self._stub = scheduler_service_pb2_grpc.JobSchedulerServiceStub(self._channel)
        self._timeout = timeout

    async def close(self) -> None:
        """Close the channel (when this client opened it)."""
        if self._owns_channel:
            await self._channel.close(None)

    async def __aenter__(self) -> AsyncSchedulerClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _call(self, method: Any, request: Any, timeout: float | None = None) -> Any:
        try:
            return await method(
                request,
                timeout=timeout if timeout is not None else self._timeout,
                metadata=_tracing.outgoing_metadata(self._metadata),
            )
        except grpc.aio.AioRpcError as exc:
            raise error_from_rpc(exc) from exc

    async def enqueue(
        self,
        job_type: str,
        payload: Any = None,
        *,
        tenant_id: str = "default",
        workflow: WorkflowRef | job_pb2.WorkflowRef | None = None,
        category: JobCategory | str | int | None = None,
        priority: int = 0,
        due: datetime | None = None,
        delay: timedelta | float | None = None,
        max_attempts: int | None = None,
        retry_policy: RetryPolicy | job_pb2.RetryPolicy | None = None,
        execution_timeout: timedelta | float | None = None,
        heartbeat_timeout: timedelta | float | None = None,
        idempotency_key: str | None = None,
        concurrency_key: str | None = None,
        content_type: str | None = None,
        traceparent: str | None = None,
        tracestate: str | None = None,
        parent_job_id: str | None = None,
        ordering_key: str | None = None,
        uniqueness: Uniqueness | None = None,
        group_id: str | None = None,
    ) -> JobView:
        """Enqueue one job. See :meth:`SchedulerClient.enqueue`."""
        with _tracing.enqueue_span(job_type, tenant_id) as context:
            if context is not None and traceparent is None:
                traceparent, tracestate = context
            request = _enqueue_request(
                job_type,
                payload,
                tenant_id=tenant_id,
                workflow=workflow,
                category=category,
                priority=priority,
                due=due,
                delay=delay,
                max_attempts=max_attempts,
                retry_policy=retry_policy,
                execution_timeout=execution_timeout,
                heartbeat_timeout=heartbeat_timeout,
                idempotency_key=idempotency_key,
                concurrency_key=concurrency_key,
                content_type=content_type,
                traceparent=traceparent,
                tracestate=tracestate,
                parent_job_id=parent_job_id,
                ordering_key=ordering_key,
                uniqueness=uniqueness,
                group_id=group_id,
            )
            response = await self._call(self._stub.Enqueue, request)
        return JobView.from_proto(
            response.job, deduplicated=response.deduplicated, debounced=response.debounced
        )

    async def enqueue_tick(
        self,
        schedule_id: str,
        nominal_time: datetime,
        job_type: str,
        payload: Any = None,
        *,
        misfire: str = "fire_once_late",
        misfire_grace: timedelta | float | None = None,
        **options: Any,
    ) -> JobView | None:
        """One scheduler tick as exactly one job. See :meth:`SchedulerClient.enqueue_tick`."""
        request = _tick_request(
            schedule_id, nominal_time, job_type, payload, misfire, misfire_grace, options
        )
        with _tracing.enqueue_span(job_type, request.job.tenant_id) as context:
            if context is not None and not request.job.traceparent:
                request.job.traceparent, request.job.tracestate = context
            return _tick_answer(await self._call(self._stub.Enqueue, request))

    async def create_group(
        self,
        completion: JobRequest | job_pb2.JobSpec,
        members: Sequence[JobRequest | job_pb2.JobSpec] = (),
        *,
        tenant_id: str = "default",
        close: bool = False,
        idempotency_key: str = "",
    ) -> tuple[GroupView, list[EnqueueResult]]:
        """Create a job group. See :meth:`SchedulerClient.create_group`."""
        request = _group_request(completion, members, tenant_id, close, idempotency_key)
        with _tracing.enqueue_batch_span(request.members):
            response = await self._call(self._stub.CreateGroup, request)
        return GroupView.from_proto(response.group), _results(response.members)

    async def close_group(self, group_id: str) -> GroupView:
        """Close a group. See :meth:`SchedulerClient.close_group`."""
        request = scheduler_service_pb2.CloseGroupRequest(group_id=group_id)
        return GroupView.from_proto((await self._call(self._stub.CloseGroup, request)).group)

    async def get_group(self, group_id: str) -> GroupView:
        """Read a group. See :meth:`SchedulerClient.get_group`."""
        request = scheduler_service_pb2.GetGroupRequest(group_id=group_id)
        return GroupView.from_proto((await self._call(self._stub.GetGroup, request)).group)

    async def enqueue_batch(
        self, jobs: Sequence[JobRequest | job_pb2.JobSpec]
    ) -> list[EnqueueResult]:
        """Enqueue several jobs atomically. See :meth:`SchedulerClient.enqueue_batch`."""
        specs = job_specs(jobs)
        with _tracing.enqueue_batch_span(specs):
            request = scheduler_service_pb2.EnqueueBatchRequest(jobs=specs)
            return _batch_results(await self._call(self._stub.EnqueueBatch, request))

    async def get_job(self, job_id: str, *, include_attempts: bool = False) -> JobView:
        """Read one job. See :meth:`SchedulerClient.get_job`."""
        request = scheduler_service_pb2.GetJobRequest(
            job_id=job_id, include_attempts=include_attempts
        )
        return JobView.from_proto((await self._call(self._stub.GetJob, request)).job)

    async def wait_for_job(self, job_id: str, timeout: float | None = None) -> JobView:
        """Wait for a terminal status. See :meth:`SchedulerClient.wait_for_job`."""
        deadline = None if timeout is None else time.monotonic() + timeout
        request = scheduler_service_pb2.WaitForJobRequest(job_id=job_id)
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise DeadlineExceededError(
                    grpc.StatusCode.DEADLINE_EXCEEDED,
                    f"job {job_id} did not finish within {timeout:g}s",
                )
            try:
                response = await self._stub.WaitForJob(
                    request, timeout=remaining, metadata=self._metadata
                )
            except grpc.aio.AioRpcError as exc:
                raise _wait_error(exc, job_id, timeout) from exc
            view = JobView.from_proto(response.job)
            if view.is_terminal:
                return view

    def watch_events(
        self,
        filter: JobEventFilter | None = None,  # noqa: A002 - the RPC's own word
        *,
        after: str | None = None,
        from_oldest: bool = False,
        reconnect: bool = True,
    ) -> AsyncEventWatch:
        """``async for event in client.watch_events(...)``; ``await watch.start()``
        places it first. See :meth:`SchedulerClient.watch_events`."""
        return AsyncEventWatch(self._watch_pages(filter, after, from_oldest, reconnect), after)

    async def _watch_pages(
        self, flt: JobEventFilter | None, after: str | None, from_oldest: bool, reconnect: bool
    ) -> AsyncIterator[tuple[list[JobEvent], str]]:
        cursor = after
        backoff = Backoff(WATCH_RECONNECT)
        while True:
            call = self._stub.WatchJobEvents(
                watch_request(flt, cursor, from_oldest),
                metadata=_tracing.outgoing_metadata(self._metadata),
            )
            try:
                async for response in call:
                    backoff.reset()
                    cursor = response.cursor or cursor
                    yield [JobEvent.from_proto(e) for e in response.events], cursor or ""
            except grpc.aio.AioRpcError as exc:
                if not reconnect or exc.code() != grpc.StatusCode.UNAVAILABLE:
                    raise error_from_rpc(exc) from exc
            finally:
                call.cancel()
            await asyncio.sleep(backoff.next_delay())
