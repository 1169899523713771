"""Job events (``WatchJobEvents``): what happened to jobs, as a resumable stream.

A watch yields :class:`JobEvent` values in the order the coordinator's event
log holds them (each job's events in the order its changes committed). Every
event carries a ``cursor``: store the cursor of the last event you processed
and pass it as ``after`` to continue with the next one, with no gap, even
across coordinator restarts. The clients' ``watch_events`` reconnect on their
own (from the last cursor they saw) when the coordinator is unavailable.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar, overload

from workflowjobs.v1 import scheduler_service_pb2

from ._codec import decode_payload
from ._convert import JobStatus, WorkflowRef, from_timestamp

_T = TypeVar("_T")

__all__ = ["JobEvent", "JobEventFilter", "JobEventKind"]


class JobEventKind(enum.StrEnum):
    """What happened to a job (see ``JobEventKind`` in ``scheduler_service.proto``)."""

    UNSPECIFIED = "UNSPECIFIED"
    ENQUEUED = "ENQUEUED"
    STARTED = "STARTED"
    ATTEMPT_FAILED = "ATTEMPT_FAILED"
    RETRY_SCHEDULED = "RETRY_SCHEDULED"
    COMPLETED = "COMPLETED"
    FAULTED = "FAULTED"
    CANCELLED = "CANCELLED"
    RELEASED = "RELEASED"
    RESCHEDULED = "RESCHEDULED"

    @classmethod
    def from_proto(cls, value: int) -> JobEventKind:
        """Map a ``workflowjobs.v1.JobEventKind`` number to the enum."""
        values = scheduler_service_pb2.JobEventKind.values()
        name = scheduler_service_pb2.JobEventKind.Name(value) if value in values else ""
        return cls(name.removeprefix("JOB_EVENT_KIND_") or "UNSPECIFIED")

    def to_proto(self) -> int:
        """Map to the ``workflowjobs.v1.JobEventKind`` number."""
        return scheduler_service_pb2.JobEventKind.Value(f"JOB_EVENT_KIND_{self.value}")


@dataclasses.dataclass(frozen=True, slots=True)
class JobEventFilter:
    """Which events a watch receives; empty fields match every job.

    Attributes:
        tenant_id: Only this tenant's jobs (a single-tenant token implies its tenant).
        definition_id: Only jobs of this workflow definition.
        instance_id: Only jobs of this workflow instance.
        correlation_id: Only jobs with this correlation id.
        job_type: Only jobs of this type.
        kinds: Only these kinds of event (names like ``"COMPLETED"`` or enum members).
        job_id: Only this job.
        group_id: Only the members of this job group.
    """

    tenant_id: str = ""
    definition_id: str = ""
    instance_id: str = ""
    correlation_id: str = ""
    job_type: str = ""
    kinds: Sequence[JobEventKind | str] = ()
    job_id: str = ""
    group_id: str = ""

    def to_proto(self) -> scheduler_service_pb2.JobEventFilter:
        """Build the ``workflowjobs.v1.JobEventFilter`` message."""
        return scheduler_service_pb2.JobEventFilter(
            tenant_id=self.tenant_id,
            definition_id=self.definition_id,
            instance_id=self.instance_id,
            correlation_id=self.correlation_id,
            job_type=self.job_type,
            kinds=[JobEventKind(str(k).upper()).to_proto() for k in self.kinds],  # type: ignore[misc]
            job_id=self.job_id,
            group_id=self.group_id,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class JobEvent:
    """One state change of a job.

    Attributes:
        cursor: Pass it as ``after`` to continue after this event.
        kind: What happened.
        time: When it happened (UTC).
        job_id: The job.
        tenant_id: The job's tenant.
        job_type: The job's type.
        workflow: The job's workflow references.
        status: The job's status as the change left it.
        attempt: The attempt the event concerns (started, failed, ...).
        due_time: When the job is due (``ENQUEUED``, ``RETRY_SCHEDULED``, ``RELEASED``,
            ``RESCHEDULED``).
        error: Why (``ATTEMPT_FAILED``, ``FAULTED``, ``CANCELLED``, ``RELEASED``).
        error_kind: The error's kind.
        result: The job's result bytes (``COMPLETED``); None otherwise.
        result_content_type: The result's content type.
        raw: The ``workflowjobs.v1.JobEvent`` message.
        group_id: The job group the job is a member of; "" when none.
    """

    cursor: str
    kind: JobEventKind
    time: datetime | None
    job_id: str
    tenant_id: str
    job_type: str
    workflow: WorkflowRef
    status: JobStatus
    attempt: int
    due_time: datetime | None
    error: str
    error_kind: str
    result: bytes | None
    result_content_type: str
    raw: Any = dataclasses.field(repr=False, compare=False)
    group_id: str = ""

    @overload
    def result_value(self, type_hint: type[_T]) -> _T: ...
    @overload
    def result_value(self, type_hint: Any = Any) -> Any: ...
    def result_value(self, type_hint: Any = Any) -> Any:
        """The result a ``COMPLETED`` event carries, decoded as by
        :meth:`JobView.result_value` (``type_hint`` likewise); None for other kinds."""
        if self.result is None:
            return None
        return decode_payload(self.result, self.result_content_type, type_hint)

    @classmethod
    def from_proto(cls, e: scheduler_service_pb2.JobEvent) -> JobEvent:
        """Read a ``workflowjobs.v1.JobEvent`` message."""
        return cls(
            cursor=e.cursor,
            kind=JobEventKind.from_proto(e.kind),
            time=from_timestamp(e.time),
            job_id=e.job_id,
            tenant_id=e.tenant_id,
            job_type=e.job_type,
            workflow=WorkflowRef.from_proto(e.workflow),
            status=JobStatus.from_proto(e.status),
            attempt=e.attempt,
            due_time=from_timestamp(e.due_time) if e.HasField("due_time") else None,
            error=e.error,
            error_kind=e.error_kind,
            result=e.result.data if e.HasField("result") else None,
            result_content_type=e.result.content_type,
            raw=e,
            group_id=e.group_id,
        )


def watch_request(
    flt: JobEventFilter | None, cursor: str | None, from_oldest: bool
) -> scheduler_service_pb2.WatchJobEventsRequest:
    """The request of a (re)connecting watch: after ``cursor`` once one is known."""
    return scheduler_service_pb2.WatchJobEventsRequest(
        filter=(flt or JobEventFilter()).to_proto(),
        after=cursor or "",
        from_oldest=from_oldest and not cursor,
    )


Pages = Iterator[tuple[list[JobEvent], str]]
AsyncPages = AsyncIterator[tuple[list[JobEvent], str]]


class _WatchPosition:
    """The events of the last response not handed out yet, and where the watch stands."""

    def __init__(self, after: str | None) -> None:
        self._buffer: collections.deque[JobEvent] = collections.deque()
        self._started = False
        self._cursor = after or ""

    @property
    def cursor(self) -> str:
        """Where the watch stands: the cursor of the last event handed out, or
        ``start()``'s; resuming after it (``after=``) misses nothing."""
        return self._cursor

    def _take(self, page: tuple[list[JobEvent], str]) -> None:
        events, cursor = page
        self._started = True
        self._buffer.extend(events)
        if not self._buffer:
            self._cursor = cursor

    def _hand_out(self) -> JobEvent:
        event = self._buffer.popleft()
        self._cursor = event.cursor
        return event


class EventWatch(_WatchPosition, Iterator[JobEvent]):
    """An event watch (``SchedulerClient.watch_events``): iterate for the events.

    The stream opens at the first ``next`` or at :meth:`start`; :meth:`close`
    (or leaving a ``with`` block) ends it. It is an iterator of
    :class:`JobEvent`; the events of one response are handed out one by one.
    """

    def __init__(self, pages: Pages, after: str | None) -> None:
        super().__init__(after)
        self._pages = pages

    def start(self) -> str:
        """Open the stream and wait until the coordinator has placed it.

        Every event committed after this returns is delivered, so enqueue
        after it to see your jobs' events without a race. Calling it again
        does nothing.

        Returns:
            The cursor the watch starts after ("" for the oldest event kept).

        Raises:
            OutOfRangeError, InvalidArgumentError: As ``watch_events``.
        """
        if not self._started:
            self._take(next(self._pages))
        return self._cursor

    def __iter__(self) -> Self:
        return self

    def __next__(self) -> JobEvent:
        while not self._buffer:
            self._take(next(self._pages))
        return self._hand_out()

    def close(self) -> None:
        """End the stream (idempotent)."""
        close = getattr(self._pages, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncEventWatch(_WatchPosition, AsyncIterator[JobEvent]):
    """The asyncio :class:`EventWatch` (``AsyncSchedulerClient.watch_events``)."""

    def __init__(self, pages: AsyncPages, after: str | None) -> None:
        super().__init__(after)
        self._pages = pages

    async def start(self) -> str:
        """Open the stream and wait until it is placed (see :meth:`EventWatch.start`)."""
        if not self._started:
            self._take(await anext(self._pages))
        return self._cursor

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> JobEvent:
        while not self._buffer:
            self._take(await anext(self._pages))
        return self._hand_out()

    async def aclose(self) -> None:
        """End the stream (idempotent)."""
        aclose = getattr(self._pages, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
