"""Job events (``WatchJobEvents``): what happened to jobs, as a resumable stream.

A watch yields :class:`JobEvent` values in the order the coordinator's event
log holds them (each job's events in the order its changes committed). Every
event carries a ``cursor``: store the cursor of the last event you processed
and pass it as ``after`` to continue with the next one, with no gap, even
across coordinator restarts. The clients' ``watch_events`` reconnect on their
own (from the last cursor they saw) when the coordinator is unavailable.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from workflowjobs.v1 import scheduler_service_pb2

from ._convert import JobStatus, WorkflowRef, from_timestamp

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
    """

    tenant_id: str = ""
    definition_id: str = ""
    instance_id: str = ""
    correlation_id: str = ""
    job_type: str = ""
    kinds: Sequence[JobEventKind | str] = ()
    job_id: str = ""

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
        due_time: When the job is due (``ENQUEUED``, ``RETRY_SCHEDULED``, ``RELEASED``).
        error: Why (``ATTEMPT_FAILED``, ``FAULTED``, ``CANCELLED``, ``RELEASED``).
        error_kind: The error's kind.
        result: The job's result bytes (``COMPLETED``); None otherwise.
        result_content_type: The result's content type.
        raw: The ``workflowjobs.v1.JobEvent`` message.
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
